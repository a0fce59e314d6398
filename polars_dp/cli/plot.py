"""``polars-dp plot release.parquet -o figure.png``: look at a release (needs the ``[plot]`` extra).

* grid releases: the 1-D marginal of ``--x`` (bars ± one noise standard deviation), or the
  2-D marginal of ``--x`` and ``--y`` (counts and their noise standard deviation side by side);
* spatial releases: the leaf boxes over the bounds of two columns, coloured by count (or by
  density); with more than two columns, the 2-D marginal on a raster of range counts;
* sequence models: the top-k strings with their estimated counts, those extrapolated by the
  Markov model in another colour (``--x`` / ``--y`` are refused).

Every value drawn is post-processing of the release (range counts, top-k): no budget is spent.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.cli.common import BadInput, Failure, check_output, open_release, write_atomic
from polars_dp.domains.queries import cell_bounds

EXAMPLES = """\
examples:
  polars-dp plot release.parquet -o age.png --x age                   # 1-D marginal, ± 1 noise std
  polars-dp plot release.parquet -o age_gender.png --x age --y gender # 2-D marginal and its noise std
  polars-dp plot tree.parquet -o leaves.png --color density           # PrivTree leaf boxes
  polars-dp plot pst.parquet -o top.png --top-k 25                    # most frequent strings
  polars-dp plot release.parquet -o age.svg --x age --size 10x4 --dpi 150

Needs matplotlib:  pip install 'polars-dp[plot]'
"""

#: Largest number of range counts computed for one figure.
MAX_QUERIES = 4_000_000
FIGURE_FORMATS = ("png", "svg", "pdf")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "plot", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="draw a release: marginals with error bars, leaf boxes, or top-k strings",
        description="Draw a release to a PNG, SVG or PDF file (written atomically).")
    p.add_argument("-o", "--output", required=True, metavar="FIGURE.png",
                   help="the figure file (.png, .svg, .pdf)")
    p.add_argument("--x", help="grid: attribute on the x axis (default: the first); spatial: x column")
    p.add_argument("--y", help="grid: second attribute (a 2-D marginal); spatial: y column")
    p.add_argument("--color", choices=["count", "density"], default="count",
                   help="spatial: colour leaves by noisy count (default) or count per unit area")
    p.add_argument("--top-k", type=int, default=20, metavar="K",
                   help="sequence models: strings shown (default 20)")
    p.add_argument("--size", default="8x6", metavar="WxH", help="figure size in inches (default 8x6)")
    p.add_argument("--dpi", type=int, default=100, help="dots per inch of a PNG (default 100)")
    p.add_argument("--title", help="figure title (default: file name, mechanism and epsilon)")


def _figure(size: tuple[float, float], dpi: int) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise Failure("plot needs matplotlib, which is not installed: "
                      "pip install 'polars-dp[plot]'") from None
    fig = Figure(figsize=size, dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _parse_size(text: str) -> tuple[float, float]:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*[xX]\s*(\d+(?:\.\d+)?)\s*", text)
    if not m or not (0 < float(m.group(1)) <= 100 and 0 < float(m.group(2)) <= 100):
        raise BadInput(f"--size {text!r}: give WIDTHxHEIGHT in inches, e.g. 8x6 (each at most 100)")
    return float(m.group(1)), float(m.group(2))


# ---------------------------------------------------------------------- grid releases
def _cell_query(attribute: pdp.Attribute) -> tuple[dict[str, Any], list[str], bool]:
    """Query columns selecting each cell of ``attribute``, its tick labels, and whether it is nominal."""
    labels = attribute.cell_labels()
    if isinstance(attribute, pdp.Nominal):
        return {attribute.column: list(labels)}, [str(x) for x in labels], True
    values = np.asarray(labels)
    cells = np.arange(len(values))
    lo, hi = cell_bounds(attribute, cells, cells + 1)  # one whole bin each (aligned bounds)
    query = {f"{attribute.column}_lo": lo, f"{attribute.column}_hi": hi}
    return query, [f"{x:g}" for x in values], False


def _grid(fig: Any, release: pdp.GridRelease, args: argparse.Namespace) -> None:
    x = args.x or release.columns[0]
    for name in filter(None, (x, args.y)):
        if name not in release.columns:
            raise BadInput(f"{name!r} is not an attribute of this release; attributes: "
                           f"{', '.join(release.columns)}")
    if args.y == x:
        raise BadInput("--x and --y name the same attribute")
    ax_attr = release.attribute(x)
    qx, ticks_x, nominal_x = _cell_query(ax_attr)
    if not args.y:
        answers = release.range_counts(pl.DataFrame(qx), std=True)
        counts, std = answers["count"].to_numpy(), answers["std"].to_numpy()
        ax = fig.add_subplot()
        if nominal_x:
            pos = np.arange(len(counts))
            ax.bar(pos, counts, yerr=std, color="tab:blue", ecolor="black", capsize=2 if len(pos) < 40 else 0,
                   label="noisy count ± 1 noise std")
            step = max(1, len(pos) // 40)
            tilt = _crowded(ticks_x[::step])
            ax.set_xticks(pos[::step], ticks_x[::step], rotation=60 if tilt else 0,
                          ha="right" if tilt else "center", fontsize="small")
        else:
            edges = _edges(ax_attr, ticks_x)
            if len(counts) <= 100:
                ax.bar((edges[:-1] + edges[1:]) / 2, counts, width=np.diff(edges) * 0.9, yerr=std,
                       color="tab:blue", ecolor="black", label="noisy count ± 1 noise std")
            else:
                ax.stairs(counts, edges, color="tab:blue", label="noisy count")
                ax.stairs(counts + std, edges, baseline=counts - std, fill=True, alpha=0.3,
                          color="tab:blue", label="± 1 noise std")
        ax.axhline(0, color="grey", linewidth=0.5)
        ax.set_xlabel(x)
        ax.set_ylabel("count")
        ax.legend(loc="best", fontsize="small")
        return
    y = args.y
    qy, ticks_y, _ = _cell_query(release.attribute(y))
    nx, ny = len(ticks_x), len(ticks_y)
    if nx * ny > MAX_QUERIES:
        raise BadInput(f"the {x} x {y} marginal has {nx * ny:,} cells; plot at most {MAX_QUERIES:,}")
    frame = pl.DataFrame({k: np.repeat(np.asarray(v), ny) for k, v in qx.items()}).hstack(
        pl.DataFrame({k: np.tile(np.asarray(v), nx) for k, v in qy.items()}))
    answers = release.range_counts(frame, std=True)
    counts = answers["count"].to_numpy().reshape(nx, ny)
    std = answers["std"].to_numpy().reshape(nx, ny)
    constant = bool(np.allclose(std, std.flat[0], rtol=1e-9))
    panels = [(counts, "noisy count", "viridis")] + ([] if constant else [(std, "noise std", "magma")])
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    ex, ey = _edges(release.attribute(x), ticks_x), _edges(release.attribute(y), ticks_y)
    for ax, (values, title, cmap) in zip(axes, panels, strict=True):
        mesh = ax.pcolormesh(ex, ey, values.T, cmap=cmap, shading="flat")
        # beside one panel, under each of two (a bar on the right would sit next to the other panel)
        fig.colorbar(mesh, ax=ax, label=title, shrink=0.8, location="right" if constant else "bottom")
        ax.set_title(f"{title} (noise std {std.flat[0]:,.3g} in every cell)" if constant else title,
                     fontsize="medium")
        ax.set_xlabel(x)
        _ticks(ax.set_xticks, release.attribute(x), ticks_x, rotate=True)
    axes[0].set_ylabel(y)
    _ticks(axes[0].set_yticks, release.attribute(y), ticks_y, rotate=False)


def _crowded(labels: list[str]) -> bool:
    """Whether horizontal tick labels would overlap (then they are tilted)."""
    return len(labels) > 8 or sum(len(x) for x in labels) > 40


def _edges(attribute: pdp.Attribute, labels: list[str]) -> np.ndarray:
    """Cell edges along an axis: 0..n for a nominal attribute; for an ordinal one, the bins in value
    space (integer bins ``[v, v + width - 1]`` drawn from ``v - 0.5`` so that ticks fall on values)."""
    if isinstance(attribute, pdp.Nominal):
        return np.arange(len(labels) + 1, dtype=np.float64)
    lows = np.asarray(attribute.cell_labels(), dtype=np.float64)
    if all(isinstance(v, int) for v in (attribute.lo, attribute.hi, attribute.width)):
        last = min(lows[-1] + attribute.width, attribute.hi + 1)
        return np.append(lows, last) - 0.5
    return np.append(lows, lows[-1] + float(attribute.width))


def _ticks(setter: Any, attribute: pdp.Attribute, labels: list[str], *, rotate: bool) -> None:
    """Category names at the cell centres of a nominal axis (ordinal axes keep numeric ticks)."""
    if not isinstance(attribute, pdp.Nominal):
        return
    n = len(labels)
    step = max(1, n // 30)
    pos = np.arange(0, n, step)
    kwargs = {"rotation": 60, "ha": "right"} if rotate and _crowded(labels[::step]) else {}
    setter(pos + 0.5, [labels[i] for i in pos], fontsize="small", **kwargs)


# ---------------------------------------------------------------------- spatial releases
#: Share of the drawn area whose density lies outside the colour scale, at each end.
DENSITY_CLIP = 0.02


def density_limits(density: np.ndarray, area: np.ndarray, clip: float = DENSITY_CLIP) -> tuple[float, float]:
    """Colour-scale limits of a density plot: the ``clip`` and ``1 - clip`` quantiles of the
    positive densities weighted by leaf area, so that what fills the picture sets the scale (a
    few tiny leaves around coincident points can otherwise stretch it over 20 decades)."""
    positive = density > 0
    values, weights = density[positive], area[positive]
    order: np.ndarray = np.argsort(values)
    values, cumulative = values[order], np.cumsum(weights[order])
    if cumulative[-1] <= 0:  # zero-area leaves only
        return float(values[0]), float(values[-1])
    cumulative /= cumulative[-1]
    lo = float(values[np.searchsorted(cumulative, clip)])
    hi = float(values[min(np.searchsorted(cumulative, 1 - clip), values.size - 1)])
    return (lo, hi) if hi > lo else (float(values[0]), float(values[-1]))
def _tree(fig: Any, release: pdp.SpatialRelease, args: argparse.Namespace) -> None:
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    cols = release.columns
    x = args.x or cols[0]
    y = args.y or (cols[1] if len(cols) > 1 and cols[1] != x else next((c for c in cols if c != x), None))
    for name in (x, y):
        if name is not None and name not in cols:
            raise BadInput(f"{name!r} is not a column of this release; columns: {', '.join(cols)}")
    if x == y:
        raise BadInput("--x and --y name the same column")
    bounds = dict(zip(cols, release.metadata()["bounds"], strict=True))
    leaves = release.leaves
    ax = fig.add_subplot()
    if y is None:  # one dimension: the leaves are intervals
        lo, hi = leaves[f"{x}_lo"].to_numpy(), leaves[f"{x}_hi"].to_numpy()
        order = np.argsort(lo)
        values = leaves["count"].to_numpy()[order]
        if args.color == "density":
            values = values / (hi - lo)[order]
        ax.stairs(values, np.append(lo[order], hi[order][-1]), fill=True, alpha=0.7)
        ax.set_xlabel(x)
        ax.set_ylabel("count per unit length" if args.color == "density" else "noisy count per leaf")
        return
    if len(cols) == 2:
        x0, x1 = leaves[f"{x}_lo"].to_numpy(), leaves[f"{x}_hi"].to_numpy()
        y0, y1 = leaves[f"{y}_lo"].to_numpy(), leaves[f"{y}_hi"].to_numpy()
        values = np.maximum(leaves["count"].to_numpy(), 0.0)  # negative noisy counts drawn as 0
        if args.color == "density":
            values = values / np.maximum((x1 - x0) * (y1 - y0), np.finfo(float).tiny)
        boxes = [Rectangle((a, b), c - a, d - b) for a, b, c, d in zip(x0, y0, x1, y1, strict=True)]
        edge = 0.2 if len(boxes) <= 20_000 else 0.0
        coll = PatchCollection(boxes, cmap="viridis", edgecolor="white", linewidth=edge)
        coll.set_array(values)
        extend = "neither"
        if args.color == "density" and np.any(values > 0):
            from matplotlib.colors import LogNorm
            vmin, vmax = density_limits(values, (x1 - x0) * (y1 - y0))
            coll.set_norm(LogNorm(vmin=vmin, vmax=vmax))
            coll.set_array(np.clip(np.where(values > 0, values, vmin), vmin, vmax))
            extend = "both"
        ax.add_collection(coll)
        label = "noisy count per unit area" if args.color == "density" else "noisy count (< 0 shown as 0)"
        fig.colorbar(coll, ax=ax, label=label, extend=extend)
        ax.set_title(f"{release.n_leaves:,} leaves", fontsize="medium")
    else:  # more columns: the 2-D marginal on a raster of range counts (leaf boxes would overlap)
        m = 128
        ex = np.linspace(bounds[x][0], bounds[x][1], m + 1)
        ey = np.linspace(bounds[y][0], bounds[y][1], m + 1)
        gx, gy = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
        raster = pl.DataFrame({f"{x}_lo": ex[gx.ravel()], f"{x}_hi": ex[gx.ravel() + 1],
                              f"{y}_lo": ey[gy.ravel()], f"{y}_hi": ey[gy.ravel() + 1]})
        values = np.maximum(release.range_counts(raster)["count"].to_numpy().reshape(m, m), 0.0)
        mesh = ax.pcolormesh(ex, ey, values.T, cmap="viridis")
        fig.colorbar(mesh, ax=ax, label=f"noisy count per raster cell (marginal over the other "
                                         f"{len(cols) - 2} columns)")
        ax.set_title(f"2-D marginal of {release.n_leaves:,} leaves", fontsize="medium")
    ax.set_xlim(*bounds[x])
    ax.set_ylim(*bounds[y])
    ax.set_xlabel(x)
    ax.set_ylabel(y)


# ---------------------------------------------------------------------- sequence models
def _sequences(fig: Any, model: pdp.SequenceRelease, args: argparse.Namespace) -> None:
    for option in ("x", "y"):
        if getattr(args, option) is not None:
            raise BadInput(f"--{option} is for grid and spatial releases; a sequence model draws its "
                           "most frequent strings (--top-k K)")
    if args.top_k < 1:
        raise BadInput(f"--top-k must be >= 1, got {args.top_k}")
    top = model.top_k(args.top_k)
    sep = "" if all(isinstance(s, str) and len(s) == 1 for s in model.alphabet) else " "
    labels = [sep.join(map(str, s)) for s in top["string"].to_list()]
    ax = fig.add_subplot()
    pos = np.arange(len(labels))
    extrapolated = top["extrapolated"].to_numpy()
    for mask, colour, label in ((~extrapolated, "tab:blue", "read from the released counts"),
                                (extrapolated, "tab:orange", "extrapolated (Markov model)")):
        if mask.any():
            ax.barh(pos[mask], top["count"].to_numpy()[mask], color=colour, label=label)
    if extrapolated.any():
        ax.legend(loc="lower right", fontsize="small")
    ax.set_yticks(pos, labels, fontsize="small" if len(labels) <= 40 else "xx-small")
    ax.invert_yaxis()
    ax.set_xlabel("estimated occurrences")
    ax.set_title(f"top {len(labels)} strings", fontsize="medium")


#: The figure of each ``plot_kind`` a release declares.
PLOTS: dict[str, Callable[[Any, Any, argparse.Namespace], None]] = {
    "marginals": _grid, "leaves": _tree, "top_strings": _sequences}


def run(args: argparse.Namespace) -> int:
    size = _parse_size(args.size)
    if not 10 <= args.dpi <= 1200:
        raise BadInput(f"--dpi {args.dpi}: use 10 to 1200")
    out = check_output(args.output, what="output")
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FIGURE_FORMATS:
        raise BadInput(f"output {args.output!r}: use a .png, .svg or .pdf file name")
    fig = _figure(size, args.dpi)
    release = open_release(args.release, args.unverified)
    if release.plot_kind not in PLOTS:
        raise BadInput(f"polars-dp plot draws no figure of a {type(release).__name__} (plot_kind "
                       f"{release.plot_kind!r}; it draws {', '.join(PLOTS)})")
    PLOTS[release.plot_kind](fig, release, args)
    fig.suptitle(args.title if args.title is not None else
                 f"{Path(args.release).name}: {release.mechanism}, epsilon {release.epsilon:g}",
                 fontsize="medium")
    write_atomic(out, lambda tmp: fig.savefig(tmp, format=fmt, dpi=args.dpi))
    if not args.quiet:
        print(f"wrote {out}", file=sys.stderr)
    return 0
