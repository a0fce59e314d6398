"""Markdown tables and matplotlib figures of the evaluation (matplotlib imported lazily)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

STYLE = {  # one colour and marker per mechanism across all figures
    "Basic": ("tab:gray", "s"), "Privelet": ("tab:blue", "o"), "Privelet+": ("tab:red", "D"),
    "Privelet+ auto": ("tab:orange", "x"), "PrivTree": ("tab:red", "D"), "UG": ("tab:gray", "s"),
    "AG": ("tab:green", "^"), "Privelet*": ("tab:blue", "o"), "PrivTree (PST)": ("tab:red", "D"),
    "N-gram": ("tab:gray", "s"), "Truncate (non-private)": ("tab:green", "^"),
}


def fmt(value: Any) -> str:
    """Numbers with 3 significant digits (scientific outside [1e-3, 1e6)), text as is."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if not math.isfinite(value):
        return str(value)
    if value != 0 and not 1e-3 <= abs(value) < 1e6:
        return f"{value:.2e}"
    return f"{value:.3g}"


def markdown_table(frame: pl.DataFrame) -> str:
    """A GitHub Markdown table of ``frame`` (numbers right-aligned)."""
    head = "| " + " | ".join(frame.columns) + " |"
    align = "|" + "|".join("---:" if frame[c].dtype.is_numeric() else "---" for c in frame.columns) + "|"
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join([head, align, *body])


def wide(frame: pl.DataFrame, index: Sequence[str], value: str, on: str = "mechanism") -> pl.DataFrame:
    """Long results -> one column per mechanism (kept in first-seen order)."""
    order = list(dict.fromkeys(frame[on].to_list()))
    out = frame.pivot(on=on, index=list(index), values=value, aggregate_function="first")
    return out.select(*index, *order)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
                         "figure.dpi": 110, "savefig.bbox": "tight"})
    return plt


def _line(ax: Any, x: np.ndarray, y: np.ndarray, name: str) -> None:
    colour, marker = STYLE.get(name, (None, "o"))
    ax.plot(x, y, marker=marker, color=colour, label=name, linewidth=1.6, markersize=5)


def plot_panels(panels: Sequence[tuple[str, pl.DataFrame, str]], x: str, path: Path, *, title: str,
                xlabel: str, ylabel: str, log_y: bool = True, ylim: tuple[float, float] | None = None,
                legend_panel: int = -1, share_y: bool = False) -> Path:
    """One log-x panel per ``(panel title, results, y column)``: a line per mechanism."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.4), squeeze=False,
                             sharey=share_y)
    for ax, (panel_title, part, y) in zip(axes[0], panels, strict=True):
        for name in dict.fromkeys(part["mechanism"].to_list()):
            m = part.filter(pl.col("mechanism") == name).sort(x)
            _line(ax, m[x].to_numpy(), m[y].to_numpy(), name)
        ax.set(xscale="log", yscale="log" if log_y else "linear", title=panel_title, xlabel=xlabel)
        if ylim is not None:
            ax.set_ylim(*ylim)
    axes[0][0].set_ylabel(ylabel)
    axes[0][legend_panel].legend(fontsize=8)
    fig.suptitle(title, y=1.02)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_privelet(results: pl.DataFrame, path: Path, *, title: str) -> Path:
    """Average square error against average coverage (log-log), one panel per epsilon."""
    panels = [(f"ε = {eps:g}", results.filter(pl.col("epsilon") == eps), "square_error")
              for eps in sorted(set(results["epsilon"].to_list()))]
    return plot_panels(panels, "coverage", path, title=title, xlabel="query coverage (quintile mean)",
                       ylabel="average square error", share_y=True)


def plot_spatial(results: pl.DataFrame, path: Path, *, title: str) -> Path:
    """Relative error against epsilon (log-log), one panel per query class."""
    panels = [(f"{cls} queries", results.filter(pl.col("query_class") == cls), "relative_error")
              for cls in dict.fromkeys(results["query_class"].to_list())]
    return plot_panels(panels, "epsilon", path, title=title, xlabel="ε", ylabel="average relative error")


def plot_sequences(results: pl.DataFrame, path: Path, *, title: str) -> Path:
    """Top-k precision (one panel per k) against epsilon; the TV distance is a second figure
    (``<path stem>_tv.png``)."""
    panels = [(f"top-{c.split('@')[1]} precision", results, c)
              for c in results.columns if c.startswith("precision@")]
    plot_panels(panels, "epsilon", path, title=title, xlabel="ε", ylabel="precision", log_y=False,
                ylim=(-0.03, 1.03), legend_panel=0)
    tv = [(label, results.filter(pl.col(column) > 0), column)  # 0: the reference itself
          for label, column in (("sampled lengths", "tv_length"), ("length-2 strings", "tv_pairs"))
          if column in results.columns]
    return plot_panels(tv, "epsilon",
                       path.with_name(path.stem + "_tv.png"), title=title, xlabel="ε",
                       ylabel="total variation distance")


def plot_decomposition(leaves: pl.DataFrame, points: np.ndarray, columns: Sequence[str], path: Path,
                       *, title: str) -> Path:
    """The leaves of a 2-D tree release drawn as rectangles over the points."""
    plt = _pyplot()
    from matplotlib.collections import LineCollection

    x, y = columns
    x0, x1 = leaves[f"{x}_lo"].to_numpy(), leaves[f"{x}_hi"].to_numpy()
    y0, y1 = leaves[f"{y}_lo"].to_numpy(), leaves[f"{y}_hi"].to_numpy()
    corners = np.stack([np.stack([x0, y0], 1), np.stack([x1, y0], 1), np.stack([x1, y1], 1),
                        np.stack([x0, y1], 1), np.stack([x0, y0], 1)], axis=1)
    fig, ax = plt.subplots(figsize=(11, 5.8))
    ax.scatter(points[:, 0], points[:, 1], s=0.6, color="tab:blue", alpha=0.4, linewidths=0,
               rasterized=True)
    ax.add_collection(LineCollection(corners, colors="black", linewidths=0.3))
    ax.set(xlim=(x0.min(), x1.max()), ylim=(y0.min(), y1.max()), xlabel=x, ylabel=y, title=title)
    ax.set_aspect("equal")
    ax.grid(False)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path
