-- Estimated substring frequencies (and their noise sd) of a relation {{queries}} with columns
-- id and string (a list of symbols, or a text of one-character symbols where the alphabet holds
-- text; any other column, and a missing, NULL or repeated id, is refused by checks; an element
-- that is not a symbol of the alphabet's kind, such as 1.5 or true for integers, is refused, as
-- polars_dp.domains.alphabet.query_symbol refuses it, never rounded), as
-- SequenceRelease.frequency_table at the default back-off: f(q1) = max(h(root)[q1], 0); then
-- for each j the deepest reachable node u whose context is a suffix of q1..qj: if it holds the
-- whole prefix, f = min(f, max(h(u)[q_{j+1}], 0)), else f = f * max(h(u)[q_{j+1}], 0) / total(u)
-- (extrapolated: the Markov assumption, whose error std does not cover).  A string longer than
-- max_length ({{max_length}}) cannot occur in the truncated sequences: count 0, std 0.
WITH RECURSIVE src AS (
    SELECT NULL AS id, NULL AS string WHERE false
    UNION ALL BY NAME
    SELECT * FROM {{queries}}
),
{{checks}},
typed AS (                                 -- the elements as text, and their type
    SELECT id, string, {{texts}} AS texts, regexp_replace(typeof(string), '\[[0-9]*\]$', '') AS kind
    FROM src AS q
),
coded AS (                                 -- the symbols (NULL where an element is none)
    SELECT id, string, texts, kind, {{symbols}} AS s FROM typed
),
q AS (
    SELECT id,
           CASE WHEN string IS NULL OR len(s) = 0
                THEN error('the empty string has no frequency; give at least one symbol' || {{where}})
                WHEN len(list_filter(s, lambda x: x IS NULL OR NOT list_contains({{alphabet}}, x))) > 0
                THEN error({{outside}} || {{where}})
                ELSE s END AS s
    FROM coded AS q
),
pos AS (                                   -- step j: the prefix s[1..j] predicts s[j + 1]
    SELECT id, s, unnest(range(1, least(len(s), {{max_length}} + 1))) AS j FROM q
),
suf AS (                                   -- every suffix length d a node could have
    SELECT id, s, j, unnest(range(0, least(j, {{height}}) + 1)) AS d FROM pos
),
step AS (
    SELECT suf.id, suf.j, arg_max(n.node, n.depth) AS node, max(n.depth) AS depth
    FROM suf JOIN {{nodes_table}} AS n
      ON n.depth = suf.d AND n.context = list_slice(suf.s, suf.j - suf.d + 1, suf.j)
    WHERE n.reach AND NOT n.starts_with_start
    GROUP BY suf.id, suf.j
),
terms AS (
    SELECT step.id, step.j, step.depth = step.j AS direct, greatest(t.count, 0.0) AS a,
           n.total AS tot, n.noise_var AS v
    FROM step
    JOIN pos ON pos.id = step.id AND pos.j = step.j
    JOIN {{nodes_table}} AS n ON n.node = step.node
    JOIN {{table}} AS t ON t.node = step.node AND t.next_symbol = pos.s[pos.j + 1]
),
fold(id, j, f, var, extrapolated) AS (
    SELECT q.id, 0, greatest(t.count, 0.0), n.noise_var, false
    FROM q JOIN {{table}} AS t ON t.node = 0 AND t.next_symbol = q.s[1]
    JOIN {{nodes_table}} AS n ON n.node = 0
    UNION ALL
    SELECT fold.id, fold.j + 1,
           CASE WHEN x.direct THEN least(fold.f, x.a)
                ELSE fold.f * (CASE WHEN x.tot > 0 THEN x.a / x.tot ELSE 0.0 END) END,
           CASE WHEN x.direct THEN (CASE WHEN fold.f < x.a THEN fold.var ELSE x.v END)
                ELSE (fold.f * (CASE WHEN x.tot > 0 THEN x.a / x.tot ELSE 0.0 END)) ** 2
                     * ((CASE WHEN fold.f > 0 THEN fold.var / fold.f ** 2 ELSE 0.0 END)
                        + (CASE WHEN x.tot > 0 AND x.a > 0
                                THEN x.v * (1 - 2 * (x.a / x.tot) + {{beta}} * (x.a / x.tot) ** 2) / x.a ** 2
                                ELSE 0.0 END)) END,
           CASE WHEN x.direct THEN fold.f < x.a AND fold.extrapolated ELSE true END
    FROM fold JOIN terms AS x ON x.id = fold.id AND x.j = fold.j + 1
)
SELECT id, (CASE WHEN max(j) < {{max_length}} THEN arg_max(f, j) ELSE 0.0 END)::DOUBLE AS count,
       (CASE WHEN max(j) < {{max_length}} THEN sqrt(arg_max(var, j)) ELSE 0.0 END)::DOUBLE AS std,
       max(j) < {{max_length}} AND arg_max(extrapolated, j) AS extrapolated
FROM fold WHERE (SELECT ok FROM checks) GROUP BY id
