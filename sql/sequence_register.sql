-- Internal tables of a sequence model (prediction suffix tree), what the macros read; users see
-- them through the views {{view}} and {{nodes_view}} (sql/release_view.sql).
-- {{cells}}: one row per (node, next symbol), as release.to_arrow(), plus cell = node * beta + next_code
--   (the release order).  count is the noisy count (unclipped for the PST: sums of noisy leaves).
CREATE TABLE {{cells}} AS SELECT * FROM {{source}};

-- {{nodes_table}}: one row per node: node, depth, context (symbols, oldest first; '#' left out),
--   starts_with_start, total = sum of the bins clipped at 0, noise_var = noise variance of a bin,
--   reach = the node is usable at the default back-off and so are all its ancestors.
CREATE TABLE {{nodes_table}} AS SELECT * FROM {{nodes_source}};

-- The release metadata (polars_dp.* Arrow schema metadata, values as JSON text).
CREATE TABLE {{meta_table}} AS SELECT key, value FROM {{meta_source}};
