"""Release the bundled military table with Basic, register it in DuckDB, query it with SQL.

    python examples/sql_range_counts.py

Every noisy answer comes with its standard deviation (the exact noise model of the release);
the true count is shown next to it only to demonstrate the error, a real analyst never sees it.
"""

from __future__ import annotations

import duckdb

from polars_dp.datasets import load_military, military_attributes
from polars_dp.evaluation import exact_range_count, frequency_matrix  # NOT private: to show the error

QUERIES = [
    ("all personnel", {}),
    ("Department of the Navy, rank 5..11", {"branch": "Department of the Navy", "rank": (5, 11)}),
    ("female officers", {"gender": "female", "grade": "officer"}),
    ("asian/pacific, commissioned", {"race": "asian/pacific", "grade": "commissioned"}),
    ("hispanic marines, rank 1..3", {"hisp": True, "branch": "marine corps", "rank": (1, 3)}),
]


def sql_arguments(predicates: dict) -> str:
    """``rank=(5, 11), branch='navy'`` -> ``rank_lo := 5, rank_hi := 11, branch := 'navy'``."""
    args = []
    for column, value in predicates.items():
        if isinstance(value, tuple):
            args += [f"{column}_lo := {value[0]}", f"{column}_hi := {value[1]}"]
        elif isinstance(value, bool):
            args.append(f"{column} := {str(value).lower()}")
        else:
            args.append(f"{column} := '{value}'")
    return ", ".join(args)


def main() -> None:
    frame = load_military(lazy=True)
    attrs = military_attributes()
    release = frame.dp.basic(attrs, epsilon=0.5)       # OS entropy: a real release
    truth = frequency_matrix(frame, attrs)            # the exact counts, only to show the error

    con = duckdb.connect()
    release.to_duckdb(con, "military")              # table + military_range_count(s) macros
    print(con.sql("SELECT key, value FROM military_meta WHERE key IN ('mechanism', 'epsilon', "
                  "'neighbours')"))

    print(f"{'query':<38}{'true':>10}{'noisy':>12}{'± std':>9}")
    for label, predicates in QUERIES:
        sql = f"SELECT count, std FROM military_range_count({sql_arguments(predicates)})"
        count, std = con.execute(sql).fetchall()[0]
        print(f"{label:<38}{exact_range_count(truth, attrs, **predicates):>10,.0f}{count:>12,.0f}"
              f"{std:>9,.0f}")

    print("\nPlain SQL on the release table (one row per cell, hierarchy levels as columns):")
    print(con.sql("SELECT branch_department, round(sum(count)) AS noisy_count FROM military "
                  "WHERE rank BETWEEN 5 AND 11 GROUP BY ALL ORDER BY 1"))


if __name__ == "__main__":
    main()
