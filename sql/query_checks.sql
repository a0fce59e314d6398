-- Refusals every range-count and frequency macro makes before answering (the rules of the Python
-- batch methods, polars_dp.releases.grid_queries): {{queries}} holds an id column and only the
-- predicate columns {{known_text}} (a misspelt column would otherwise read as "whole domain"),
-- and every id is present and distinct (an answer row is known by its id alone).
-- One row, ok = true; the answers' final SELECT filters on it, so an error here stops the query.
checks AS MATERIALIZED (
    SELECT CASE
        WHEN len(c.unknown) > 0
        THEN error('query column ''' || c.unknown[1] || ''' is not a predicate of this release; '
                   || 'keep only the columns id, ' || {{known_text}} || ' in the queries table')
        WHEN NOT c.has_id
        THEN error('the queries table has no id column; ' || {{id_rule}})
        WHEN i.nulls > 0
        THEN error(i.nulls || ' query row(s) have a NULL id; ' || {{id_rule}})
        WHEN i.dup IS NOT NULL
        THEN error('query id ' || CAST(i.dup AS VARCHAR) || ' appears ' || i.times || ' times; '
                   || {{id_rule}})
        ELSE true END AS ok
    FROM (SELECT list_filter(list(column_name), lambda x: NOT list_contains({{known_list}}, lower(x)))
                     AS unknown,
                 list_contains(list(lower(column_name)), 'id') AS has_id
          -- the column names from the row type (DESCRIBE does not see a macro's parameters in
          -- DuckDB 1.5 clients); the left join gives the row type even for an empty table
          FROM (SELECT unnest(struct_keys(__pdp_query_row)) AS column_name
                FROM (SELECT 1 AS __pdp_one)
                LEFT JOIN (SELECT * FROM {{queries}} LIMIT 1) AS __pdp_query_row ON true)) AS c,
         (SELECT coalesce(sum(n) FILTER (WHERE id IS NULL), 0) AS nulls,
                 arg_max(id, n) FILTER (WHERE id IS NOT NULL AND n > 1) AS dup,
                 max(n) FILTER (WHERE id IS NOT NULL) AS times
          FROM (SELECT id, count(*) AS n FROM {{source}} GROUP BY id)) AS i
)
