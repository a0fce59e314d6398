-- Answers of range-count queries (one row per query) from the prefix column of {{table}}
-- (the internal cell table).
-- {{queries}}: a relation with an id column and predicate columns <ordinal>_lo / <ordinal>_hi
-- and <nominal> (a hierarchy label); a missing column or NULL means the whole domain; any other
-- column, and a missing, NULL or repeated id, is refused (checks).
-- align ('exact', 'outer' or 'inner'): what to do with an ordinal bound inside a bin.
WITH q AS (
    SELECT {{typed_columns}} WHERE false      -- fixes the type of every predicate column
    UNION ALL BY NAME
    SELECT * FROM {{queries}}
),
{{checks}},
vals AS (                                    -- ordinal bounds checked: numbers inside the domain
    SELECT q.*{{values}}
    FROM q
),
pos AS (                                     -- ordinal bounds: their bins, on a bin edge or not
    SELECT v.*{{positions}}
    FROM vals AS v
),
ranged AS (                                  -- per axis k: cells [s_k, e_k) (aligned as align says)
    SELECT q.id, {{ranges}}
    FROM pos AS q{{label_joins}}
),
box AS MATERIALIZED (                        -- an ordinal range holding no whole bin is an error
    SELECT q.id, {{checked}}
    FROM ranged AS q
),
corner AS (                                  -- inclusion-exclusion: 2^d corners of each box
    SELECT box.id,
           CASE WHEN ({{d}} - bit_count(c.corner)) % 2 = 0 THEN 1.0 ELSE -1.0 END AS sign,
           {{corner_cell}} AS cell
    FROM box, range({{n_corners}}) AS c(corner)
    WHERE {{corner_valid}}
),
total AS (
    SELECT corner.id, sum(corner.sign * t.prefix) AS count
    FROM corner JOIN {{table}} AS t ON t.cell = corner.cell
    GROUP BY corner.id
)
SELECT id, count, std, count - acc AS lo, count + acc AS hi FROM (
    SELECT box.id,
           coalesce(total.count, 0.0)::DOUBLE AS count,
           sqrt({{variance}})::DOUBLE AS std,  -- noise std: sqrt(2 scale^2 prod_k f_k)
           {{accuracy}} AS acc                 -- P(|noise| > acc) <= alpha (NULL: post-processed)
    FROM {{box_values}} AS box LEFT JOIN total ON total.id = box.id
    WHERE (SELECT ok FROM checks)
)
ORDER BY id                                  -- answers in query-id order
