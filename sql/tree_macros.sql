-- Range count of one box: every range is optional (NULL = the whole declared range).
--   SELECT * FROM {{name}}_range_count(longitude_lo := 0, longitude_hi := 30);
CREATE {{create}}MACRO {{single_macro}}({{parameters}}) AS TABLE
SELECT count, noise_std FROM (
{{single_answers}}
);

-- Range counts of a table of boxes (an id column plus <column>_lo / <column>_hi), late bound:
--   SELECT * FROM {{name}}_range_counts('my_boxes') ORDER BY id;
CREATE {{create}}MACRO {{batch_macro}}(queries) AS TABLE
{{batch_answers}};
