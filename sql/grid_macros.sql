-- Range count of one query: every predicate is optional (NULL = whole domain).
--   SELECT * FROM {{name}}_range_count(age_lo := 20, age_hi := 30, occupation := 'Sales');
CREATE {{create}}MACRO {{single_macro}}({{parameters}}) AS TABLE
SELECT count, std FROM (
{{single_answers}}
);

-- Range counts of a table of queries (an id column plus the predicate columns), late bound:
--   SELECT * FROM {{name}}_range_counts('my_queries') ORDER BY id;
CREATE {{create}}MACRO {{batch_macro}}(queries) AS TABLE
{{batch_answers}};
