-- Range count of one query: every predicate is optional (NULL = whole domain); align := 'exact'
-- (an ordinal bound inside a bin is an error naming the nearest aligned bounds), 'outer' or 'inner';
-- lo, hi: count -/+ the accuracy at alpha := 0.05 (NULL once post-processed or with alpha := NULL).
--   SELECT * FROM {{name}}_range_count(age_lo := 20, age_hi := 30, occupation := 'Sales');
CREATE MACRO {{single_macro}}({{parameters}}) AS TABLE
SELECT count, std, lo, hi FROM (
{{single_answers}}
);

-- Range counts of a table of queries (an id column plus the predicate columns), late bound:
--   SELECT * FROM {{name}}_range_counts('my_queries');               -- rows in id order
--   SELECT * FROM {{name}}_range_counts('my_queries', align := 'outer');
CREATE MACRO {{batch_macro}}(queries, align := 'exact', alpha := 0.05) AS TABLE
{{batch_answers}};
