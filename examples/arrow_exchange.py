"""A release is an Arrow table: hand it straight to DuckDB, Polars, pyarrow and pandas.

    python examples/arrow_exchange.py [--out DIR]

The bundled military table (1.4 million people, public domain) is released once with Basic
(Laplace noise per cell).  The release object itself is an Arrow stream (the PyCapsule
interface): look at DuckDB querying the Python variable by name, ``pl.DataFrame(release)``,
``pa.table(release)`` keeping the ``polars_dp.*`` metadata, pandas 3 ``DataFrame.from_arrow``,
and a release file scanned lazily (``pdp.scan_release``: verified once, then only the row
groups a filter needs are read).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

import polars_dp as pdp
from polars_dp.datasets import load_military, military_attributes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=0.5)
    parser.add_argument("--out", help="folder for the release file (default: a temp folder)")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="polars_dp_example_"))
    out.mkdir(parents=True, exist_ok=True)

    release = load_military(lazy=True).dp.basic(military_attributes(), epsilon=args.epsilon)
    print(release, "\n")

    print("DuckDB, the Python variable by name (replacement scan):")
    print(duckdb.sql("SELECT branch_department, round(sum(count)) AS noisy_count "
                     "FROM release GROUP BY ALL ORDER BY 1"))

    frame = pl.DataFrame(release)
    print(f"Polars: pl.DataFrame(release) -> {frame.shape}, label dtypes {frame.dtypes[:2]}")

    table = pa.table(release)
    meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items() if b"epsilon" in k
            or b"mechanism" in k or b"neighbours" in k}
    print(f"pyarrow: pa.table(release) keeps the metadata: {meta}")

    try:
        import pandas as pd
    except ImportError:
        print("pandas is not installed: skipped")
    else:
        if hasattr(pd.DataFrame, "from_arrow"):  # pandas >= 3.0
            print(f"pandas: pd.DataFrame.from_arrow(release) -> {pd.DataFrame.from_arrow(release).shape}")
        else:
            print(f"pandas: pa.table(release).to_pandas() -> {pa.table(release).to_pandas().shape}")

    path = release.write_parquet(out / "military.parquet")
    navy = (pdp.scan_release(path)                       # verified here, read lazily below
            .filter(pl.col("branch") == "navy", pl.col("rank").is_between(5, 11))
            .select(pl.col("count").sum()).collect().item())
    print(f"\nscan_release({path.name}): noisy navy ranks 5..11 = {navy:,.0f} "
          f"(range_count: {release.range_count(branch='navy', rank=(5, 11)):,.0f})")


if __name__ == "__main__":
    main()
