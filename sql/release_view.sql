-- The user-facing name of a release part: a view of {{source}} (the internal table the macros
-- read) showing only the user columns.  DuckDB views are read-only: an UPDATE through {{view}}
-- fails instead of making the table and the macros disagree.
CREATE VIEW {{view}} AS SELECT {{columns}} FROM {{source}};

COMMENT ON VIEW {{view}} IS {{comment}};

COMMENT ON TABLE {{source}} IS {{internal_comment}};
