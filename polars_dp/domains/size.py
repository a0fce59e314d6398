"""How large a declared domain may be: the one size rule, from public inputs only.

Two limits, each refused with :class:`~polars_dp.errors.DomainTooLargeError` before anything is
allocated and before any data is read (the counts, the plans and the workloads all call them):

* :func:`check_domain_size`: an array of one value per cell (the frequency matrix, a spatial
  grid, a workload's per-axis Gram statistics) is refused when ``cells * bytes_per_cell``
  exceeds the machine's physical memory (:func:`polars_dp.memory.total_memory_bytes`, a
  property of the machine, not of the data);
* :func:`check_cell_indices`: a cell index is an int64 everywhere (query ranges, prefix sums,
  the count's flat index), so an axis of more than :data:`MAX_AXIS_CELLS` cells cannot be
  queried; a plan over it still builds and states its scales, but a range on it is refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from polars_dp.domains.attributes import Attribute
from polars_dp.errors import DomainTooLargeError
from polars_dp.memory import total_memory_bytes

#: The largest number of cells of one axis whose cell ranges ``[start, stop)`` fit int64.
MAX_AXIS_CELLS = (1 << 63) - 1
#: What to change when a domain is too large (the default advice of both checks).
FIX = "use coarser bins (a larger width), fewer attributes or a smaller hierarchy"


def size_text(x: float) -> str:
    """A possibly astronomical number for a message: ``1,234,567`` or ``4.4e+28``."""
    return f"{int(x):,}" if x < 1e21 else f"{x:.2g}"


def check_domain_size(shape: tuple[int, ...], *, bytes_per_cell: int = 24,
                      attributes: Iterable[Attribute] = (), dims: str | None = None,
                      fix: str = FIX, what: str = "the declared domain") -> int:
    """Number of cells of ``shape``; raise DomainTooLargeError before anything is allocated
    when ``cells * bytes_per_cell`` exceeds physical memory.  ``dims`` describes the shape,
    ``what`` names the array and ``fix`` says what to change, in the message."""
    n = 1
    for s in shape:
        n *= int(s)
    need = n * bytes_per_cell
    have = total_memory_bytes()
    if need > have:
        if dims is None:
            dims = " x ".join(f"{a.column}={a.n_cells}" for a in attributes) or " x ".join(map(str, shape))
        raise DomainTooLargeError(
            f"{what} has {size_text(n)} cells ({dims}); working on it needs about "
            f"{size_text(need / 2**30)} GiB but this machine has {have / 2**30:.1f} GiB; {fix}"
        )
    return n


def check_cell_indices(attributes: Iterable[Attribute]) -> None:
    """DomainTooLargeError naming the first axis whose cells cannot be indexed in int64
    (more than :data:`MAX_AXIS_CELLS`)."""
    for a in attributes:
        if a.n_cells > MAX_AXIS_CELLS:
            raise DomainTooLargeError(
                f"{a.column!r} declares {size_text(a.n_cells)} cells, past the {MAX_AXIS_CELLS:,} "
                f"whose cell ranges fit int64: no range on it can be computed; use coarser bins "
                f"(a larger width) for {a.column!r}"
            )


__all__ = ["FIX", "MAX_AXIS_CELLS", "check_cell_indices", "check_domain_size", "size_text"]
