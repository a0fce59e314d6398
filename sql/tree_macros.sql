-- Range count of one box: every range is optional (NULL = the whole declared range);
-- noise_lo, noise_hi: count -/+ the leaf-noise half-width at alpha := 0.05 (leaf noise only).
--   SELECT * FROM {{name}}_range_count(longitude_lo := 0, longitude_hi := 30);
CREATE MACRO {{single_macro}}({{parameters}}) AS TABLE
SELECT count, noise_std, noise_lo, noise_hi FROM (
{{single_answers}}
);

-- Range counts of a table of boxes (an id column plus <column>_lo / <column>_hi), late bound:
--   SELECT * FROM {{name}}_range_counts('my_boxes') ORDER BY id;
--   SELECT * FROM {{name}}_range_counts('my_boxes', alpha := 0.01);
CREATE MACRO {{batch_macro}}(queries, alpha := 0.05) AS TABLE
{{batch_answers}};
