-- Internal table of a grid release (what the macros read): one row per cell, sorted by the
-- linear cell index.  {{source}} is a transient Arrow stream: attribute columns, count, cell,
-- prefix.  prefix = inclusive d-dimensional prefix sum: sum of count over cells <= this cell on
-- every axis.  Users see it through the view {{view}} (sql/release_view.sql).
CREATE TABLE {{cells}} AS
SELECT * FROM {{source}}{{order_by}};

-- The release metadata (polars_dp.* Arrow schema metadata, values as JSON text).
CREATE TABLE {{meta_table}} AS SELECT key, value FROM {{meta_source}};
