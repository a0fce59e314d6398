"""polars-dp: differentially private synopses (Privelet, PrivTree) from Polars, as Arrow.

>>> import polars as pl, polars_dp as pdp
>>> df = pl.DataFrame({"age": [23, 35, 35, 61, 47]})
>>> release = df.dp.basic([pdp.Ordinal("age", 0, 99, width=10)], epsilon=1.0)
>>> release.shape, release.noise_scale   # Laplace scale 2 / epsilon (replace-one neighbours)
((10,), 2.0)
>>> answer = release.range_count(age=(30, 49))   # a noisy count of ages 30..49
"""

import warnings
from typing import Any

from polars_dp import duckdb, errors, mechanisms, releases  # noqa: F401  (pdp.duckdb, pdp.releases)
from polars_dp import namespace as _namespace  # noqa: F401  (registers df.dp / lf.dp)
from polars_dp._version import __version__
from polars_dp.budget import Accountant
from polars_dp.domains import workload
from polars_dp.domains.attributes import Attribute, Nominal, Ordinal
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.domains.privacy_unit import Rows
from polars_dp.errors import (  # noqa: F401  (in __all__ through errors.__all__)
    BudgetExceededError,
    ColumnNotFoundError,
    DomainError,
    DomainTooLargeError,
    EmptyReleaseError,
    HierarchyError,
    LedgerError,
    ParameterError,
    PolarsDPError,
    QueryError,
    ReleaseFormatError,
    ReleaseSignatureError,
    ReleaseWriteError,
)
from polars_dp.evaluation.spatial_workloads import random_boxes, relative_errors
from polars_dp.evaluation.workloads import random_workload
from polars_dp.ledger import Ledger
from polars_dp.mechanisms import (
    adaptive_grid,
    basic,
    hierarchical,
    ngram_sequences,
    privelet,
    privelet_grid,
    privtree,
    privtree_sequences,
    privtree_subgrid,
    uniform_grid,
)
from polars_dp.namespace import dp
from polars_dp.plans import Plan, compare, plan
from polars_dp.releases import (
    GridRelease,
    Release,
    SequenceRelease,
    SpatialRelease,
    read_release,
    scan_release,
)
from polars_dp.session import Session

__all__ = [
    "Accountant",
    "Attribute",
    "GridRelease",
    "Hierarchy",
    "Ledger",
    "Nominal",
    "Ordinal",
    "Plan",
    "Release",
    "Rows",
    "SequenceRelease",
    "Session",
    "SpatialRelease",
    "__version__",
    "adaptive_grid",
    "basic",
    "compare",
    "dp",
    "hierarchical",
    "ngram_sequences",
    "plan",
    "privelet",
    "privelet_grid",
    "privtree",
    "privtree_sequences",
    "privtree_subgrid",
    "random_boxes",
    "random_workload",
    "read_release",
    "relative_errors",
    "scan_release",
    "uniform_grid",
    "workload",
]
__all__ += errors.__all__

#: Every registered mechanism function is ``pdp.<name>``: those imported above by name (for type
#: checkers) and any other the registry holds (:data:`polars_dp.mechanisms.__all__`).
globals().update({name: getattr(mechanisms, name) for name in mechanisms.__all__})
__all__ = sorted({*__all__, *mechanisms.__all__})

#: Former names, kept as deprecated aliases (outside ``__all__``): a spatial release also holds
#: plain grids (UG, AG), and every output type is named ``*Release``.
_RENAMED = {"TreeRelease": "SpatialRelease", "SequenceModel": "SequenceRelease"}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        new = _RENAMED[name]
        warnings.warn(f"polars_dp.{name} is deprecated; use polars_dp.{new}", DeprecationWarning,
                      stacklevel=2)
        return globals()[new]
    raise AttributeError(f"module 'polars_dp' has no attribute {name!r}")
