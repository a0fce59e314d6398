-- Native table of a spatial tree release: one row per leaf box (<column>_lo, <column>_hi per
-- dimension, depth, count, leaf = position in the release); the leaves partition the box.
CREATE TABLE {{table}} AS SELECT * FROM {{source}};

-- The release metadata (polars_dp.* Arrow schema metadata, values as JSON text).
CREATE TABLE {{meta_table}} AS SELECT key, value FROM {{meta_source}};

COMMENT ON TABLE {{table}} IS {{comment}};
