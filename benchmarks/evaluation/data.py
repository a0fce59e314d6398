"""The evaluation's datasets, each with its PUBLIC domain declaration.

Nothing here reads the data to choose a bound, a bin edge or a category, with one stated
exception: the GSS occupation hierarchy (``occ10`` codes under their ``occrecode`` group).
Those codes are the US Census Bureau's published 2010 occupation classification, whose
code list and major groups are public; no copy of that list ships with the data, so the
code -> group pairs are read from the table as a stand-in.  In production the hierarchy
comes from the published code list (every code, seen or not), never from the private data.

Real data lives in ``<repo>/../shared/data`` (override with ``POLARS_DP_DATA`` or
``--data``); :func:`data_dir` returns ``None`` when it is absent and the real-data
experiments are skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.noise import make_rng

REPO = Path(__file__).resolve().parents[2]
DATA_ENV = "POLARS_DP_DATA"

#: Public income range of the GSS table (constant 1986 USD): 1,000 bins of 500 USD over
#: [0, 500,000); larger incomes are clamped into the last bin (a row-wise public rule).
GSS_INCOME = (0, 499_500, 500)
#: Public bounding boxes of the spatial data sets (degrees).
GEONAMES_BOUNDS = {"longitude": (-180.0, 180.0), "latitude": (-90.0, 90.0)}
#: The United States with Alaska and Hawaii, for both ends of a flight.
US_LON, US_LAT = (-170.0, -60.0), (15.0, 65.0)
FLIGHTS_BOUNDS = {"origin_lon": US_LON, "origin_lat": US_LAT, "dest_lon": US_LON, "dest_lat": US_LAT}
#: msnbc's public page categories 1..17; sequences are truncated to this many page views.
MSNBC_ALPHABET = tuple(range(1, 18))
MSNBC_MAX_LENGTH = 20


def data_dir(override: str | os.PathLike | None = None) -> Path | None:
    """The real-data folder (flag, then ``$POLARS_DP_DATA``, then ``<repo>/../shared/data``),
    or ``None`` when it does not exist."""
    candidate = override or os.environ.get(DATA_ENV) or REPO.parent / "shared" / "data"
    path = Path(candidate)
    return path if path.is_dir() else None


@dataclass
class Table:
    """A table for a grid mechanism: frame, public attributes and row-wise input options."""

    name: str
    frame: pl.LazyFrame
    attributes: list[pdp.Attribute]
    options: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.n_cells for a in self.attributes)


@dataclass
class Points:
    """A point set for the spatial mechanisms: frame, coordinate columns and public box."""

    name: str
    frame: pl.DataFrame
    bounds: dict[str, tuple[float, float]]
    description: str = ""

    @property
    def columns(self) -> list[str]:
        return list(self.bounds)


# ---------------------------------------------------------------------- Privelet tables
def gss_wages(folder: Path) -> Table:
    """GSS 1974-2018 (age x gender x occupation x income = 72 x 2 x 538 x 1,000 cells)."""
    frame = pl.scan_parquet(folder / "census_gss_wages.parquet")
    lookup = frame.select("occrecode", "occ10").drop_nulls().unique().collect()
    occupation = pdp.Hierarchy.from_levels(lookup.with_columns(pl.col("occrecode").cast(pl.String)),
                                           ["occrecode", "occ10"], root="all occupations")
    lo, hi, width = GSS_INCOME
    attributes = [
        pdp.Ordinal("age", 18, 89),
        pdp.Nominal("gender", categories=["Female", "Male"]),
        pdp.Nominal("occ10", occupation),
        pdp.Ordinal("realrinc", lo, hi, width=width),
    ]
    return Table("gss", frame, attributes, {"nulls": "drop", "on_out_of_domain": "clamp"},
                 "GSS wages 1974-2018: age 18..89, gender, occupation (occ10 under occrecode), "
                 f"income in {hi // width + 1} bins of {width} USD-1986 over [{lo}, {hi + width})")


def census_hierarchy(groups: int = 8, leaves_per_group: int = 64) -> pdp.Hierarchy:
    """Occupation of the synthetic census: ``groups x leaves_per_group`` leaves, 3 levels."""
    tree = {f"group {g}": list(range(g * leaves_per_group, (g + 1) * leaves_per_group))
            for g in range(groups)}
    return pdp.Hierarchy.from_dict(tree, root="all occupations", level_names=["occupation_group"])


def census_attributes() -> list[pdp.Attribute]:
    """Age 0..100, gender 2, occupation 512 (3 levels), income 0..1000: 1.04e8 cells (the
    Brazil census shape of the Privelet paper's Table III)."""
    return [
        pdp.Ordinal("age", 0, 100),
        pdp.Nominal("gender", categories=["female", "male"]),
        pdp.Nominal("occupation", census_hierarchy()),
        pdp.Ordinal("income", 0, 1000),
    ]


def synthetic_census(n: int, seed: Any = 0) -> Table:
    """``n`` census-shaped rows: skewed ages, Zipf-like occupations, log-normal incomes that
    grow with age and depend on the occupation group (so the matrix is sparse and skewed)."""
    rng = make_rng(seed)
    age = np.clip(rng.normal(38, 17, n), 0, 100).astype(np.int64)
    gender = rng.integers(0, 2, n)
    weights = 1.0 / np.arange(1, 513) ** 1.1
    occupation = rng.permutation(512)[np.searchsorted(np.cumsum(weights) / weights.sum(),
                                                      rng.random(n))]
    level = 3.2 + 0.012 * np.minimum(age, 60) + 0.05 * (occupation // 64) + 0.1 * gender
    income = np.clip(np.exp(rng.normal(level, 0.6, n)), 0, 1000).astype(np.int64)
    frame = pl.DataFrame({
        "age": age, "gender": np.array(["female", "male"])[gender],
        "occupation": occupation, "income": income,
    }).lazy()
    return Table("census", frame, census_attributes(), {},
                 f"synthetic census, {n:,} rows: age 0..100, gender 2, occupation 512 leaves under "
                 "8 groups (3 levels), income 0..1000")


# ---------------------------------------------------------------------- spatial
def geonames(folder: Path) -> Points:
    frame = pl.read_parquet(folder / "spatial_geonames_cities500.parquet",
                            columns=["longitude", "latitude"])
    return Points("geonames", frame, dict(GEONAMES_BOUNDS),
                  "GeoNames cities500 (lon, lat), box [-180, 180] x [-90, 90]")


def flights(folder: Path) -> Points:
    frame = (pl.read_parquet(folder / "flights_nyc2013.parquet", columns=list(FLIGHTS_BOUNDS))
             .drop_nulls())
    return Points("flights", frame, dict(FLIGHTS_BOUNDS),
                  "NYC 2013 flights (origin lon/lat, destination lon/lat); rows with a null "
                  f"coordinate dropped; box lon {list(US_LON)} x lat {list(US_LAT)} for both ends")


# ---------------------------------------------------------------------- sequences
def msnbc(folder: Path) -> pl.DataFrame:
    """msnbc page-category sequences (989,818 sessions, 17 categories)."""
    return pl.read_parquet(folder / "seq_msnbc.parquet", columns=["pages"])
