-- Internal table of a spatial tree release (what the macros read): one row per leaf box
-- (<column>_lo, <column>_hi per dimension, depth, count, leaf = position in the release); the
-- leaves partition the box.  Users see it through the view {{view}} (sql/release_view.sql).
CREATE TABLE {{cells}} AS SELECT * FROM {{source}};

-- The release metadata (polars_dp.* Arrow schema metadata, values as JSON text).
CREATE TABLE {{meta_table}} AS SELECT key, value FROM {{meta_source}};
