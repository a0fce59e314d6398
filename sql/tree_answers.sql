-- Answers of box range counts (one row per query) against the leaves of {{table}}.
-- {{queries}}: a relation with an id column and <column>_lo / <column>_hi columns (closed ranges);
-- a missing column or NULL means the whole declared range; any other column, and a missing, NULL
-- or repeated id, is refused (checks).  Each leaf overlapping a box
-- contributes count * (overlapped volume / leaf volume): tuples are assumed uniform in a leaf.
-- noise_std: the noise standard deviation of the answer, as release.range_counts(std=True);
-- noise_lo, noise_hi: count -/+ the leaf-noise half-width at alpha, as range_counts(alpha=...)
-- (leaf noise only, NULL where the release states no error bar or alpha is NULL).
WITH q AS (
    SELECT {{typed_columns}} WHERE false      -- fixes the type of every predicate column
    UNION ALL BY NAME
    SELECT * FROM {{queries}}
),
{{checks}},
box AS (                                     -- per dimension k: the closed range [lo_k, hi_k]
    SELECT q.id, {{bounds}}
    FROM q
),
total AS (
    SELECT box.id, sum(t.count * {{fractions}}) AS count, sum(({{fractions}}) ** 2) AS weight_squares
    FROM box JOIN {{table}} AS t ON {{overlap}}
    GROUP BY box.id
)
SELECT id, count, noise_std, count - noise_half AS noise_lo, count + noise_half AS noise_hi
FROM (
    SELECT box.id, coalesce(total.count, 0.0)::DOUBLE AS count, {{noise_std}} AS noise_std,
           {{noise_half}} AS noise_half
    FROM box LEFT JOIN total ON total.id = box.id
    WHERE (SELECT ok FROM checks)
)
ORDER BY id                                  -- answers in query-id order
