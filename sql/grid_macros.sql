-- Range count of one query: every predicate is optional (NULL = whole domain); align := 'exact'
-- (an ordinal bound inside a bin is an error naming the nearest aligned bounds), 'outer' or 'inner'.
--   SELECT * FROM {{name}}_range_count(age_lo := 20, age_hi := 30, occupation := 'Sales');
CREATE {{create}}MACRO {{single_macro}}({{parameters}}) AS TABLE
SELECT count, std FROM (
{{single_answers}}
);

-- Range counts of a table of queries (an id column plus the predicate columns), late bound:
--   SELECT * FROM {{name}}_range_counts('my_queries');               -- rows in id order
--   SELECT * FROM {{name}}_range_counts('my_queries', align := 'outer');
CREATE {{create}}MACRO {{batch_macro}}(queries, align := 'exact') AS TABLE
{{batch_answers}};
