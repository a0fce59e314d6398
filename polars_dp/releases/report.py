"""A release report: one self-contained HTML page (no script, no network) a publisher can post.

``release.report("release.html", alpha=0.05)`` writes, atomically: the release card
(:mod:`polars_dp.releases.card`) as a table and in full as JSON, then inline SVG figures
computed from the release alone:

* grid: per attribute, its marginal counts (every value of the others) in at most ``BARS``
  bars of contiguous cells, each with its error bar, the noise half-width at ``alpha`` of that
  range (the release's own tail bound; none once post-processed);
* spatial (two columns): the leaf map, each leaf shaded by its noisy density (count / area,
  clipped at 0), at most ``MAX_LEAVES`` leaves drawn;
* sequences: the ``TOP`` most frequent strings with error bars of one noise standard deviation
  (``frequencies(std=True)``; an extrapolated string's bar does not cover its Markov error).
"""

from __future__ import annotations

import html
import itertools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from polars_dp.errors import ParameterError
from polars_dp.releases.card import ALPHA, Carded, GridLike, SequenceLike, SpatialLike, release_card
from polars_dp.releases.io import write_atomic

if TYPE_CHECKING:
    import os


class Reported(Carded, Protocol):
    """What the report reads of a release beside its card: the figures its type draws
    (:meth:`~polars_dp.Release.report_figures`)."""

    def report_figures(self, alpha: float) -> list[str]: ...


#: At most this many bars per marginal (contiguous cells are grouped beyond it).
BARS = 60
#: At most this many leaves on a leaf map.
MAX_LEAVES = 40_000
#: How many strings a sequence report lists.
TOP = 20
WIDTH, HEIGHT = 720, 260

STYLE = ("body{font-family:sans-serif;max-width:780px;margin:2em auto;color:#222}"
         "table{border-collapse:collapse}td{border-top:1px solid #ddd;padding:3px 8px;vertical-align:top}"
         "td:first-child{font-weight:bold;white-space:nowrap}.warn{color:#b00;font-weight:bold}"
         "pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}")


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def bar_chart(title: str, labels: list[str], values: np.ndarray, errors: np.ndarray | None) -> str:
    """An SVG bar chart of ``values`` with symmetric ``errors`` (None: no error bars)."""
    err = np.zeros_like(values) if errors is None else np.nan_to_num(errors)
    top = float(max(np.max(values + err), 0.0)) or 1.0
    bottom = float(min(np.min(values - err), 0.0))
    left, plot_h, n = 60, HEIGHT - 70, len(values)
    step = (WIDTH - left - 10) / max(n, 1)

    def y(v: float) -> float:
        return 30 + plot_h * (top - v) / (top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" role="img">',
             f'<title>{_esc(title)}</title><text x="{left}" y="18" font-size="13">{_esc(title)}</text>',
             f'<line x1="{left}" x2="{WIDTH - 10}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#888"/>',
             f'<text x="{left - 4}" y="{y(top):.1f}" font-size="10" text-anchor="end">{top:.4g}</text>']
    for i, (v, e) in enumerate(zip(values, err, strict=True)):
        x = left + i * step
        parts.append(f'<rect x="{x + 1:.1f}" y="{min(y(v), y(0)):.1f}" width="{max(step - 2, 1):.1f}" '
                     f'height="{abs(y(0) - y(v)):.1f}" fill="#4a7ab0"><title>{_esc(labels[i])}: {v:.6g}'
                     f'{f" ± {e:.4g}" if errors is not None else ""}</title></rect>')
        if errors is not None and e > 0:
            cx = x + step / 2
            parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(v + e):.1f}" y2="{y(v - e):.1f}" '
                         'stroke="#222"/>')
    for i in sorted({0, n // 2, n - 1}):
        parts.append(f'<text x="{left + (i + 0.5) * step:.1f}" y="{HEIGHT - 22}" font-size="10" '
                     f'text-anchor="middle">{_esc(labels[i])[:24]}</text>')
    parts.append("</svg>")
    return "".join(parts)


def grid_figures(release: GridLike, alpha: float) -> list[str]:
    """Per attribute: its marginal in at most ``BARS`` bars, error bars at ``alpha``."""
    out = []
    shape = list(release.shape)
    correlated = not release.noise_model.exact
    for j, attribute in enumerate(release.attributes):
        n = shape[j]
        ends = np.unique(np.linspace(0, n, min(n, BARS) + 1).round().astype(np.int64))
        marginal = np.asarray(release.counts, dtype=np.float64).sum(axis=tuple(k for k in range(len(shape))
                                                                                 if k != j))
        values = np.add.reduceat(marginal, ends[:-1])
        starts = np.zeros((len(ends) - 1, len(shape)), dtype=np.int64)
        stops = np.tile(np.array(shape, dtype=np.int64), (len(ends) - 1, 1))
        starts[:, j], stops[:, j] = ends[:-1], ends[1:]
        errors = None if correlated else release.range_accuracy(starts, stops, alpha)
        cells = attribute.cell_labels()
        labels = [str(cells[s]) if t - s == 1 else f"{cells[s]}..{cells[t - 1]}"
                  for s, t in itertools.pairwise(ends)]
        note = "" if errors is not None else " (post-processed: no exact error bars)"
        title = (f"{attribute.column}: noisy marginal counts, ± the noise bound that holds with "
                 f"probability {1 - alpha:.0%}{note}")
        out.append(bar_chart(title, labels, values, errors))
    return out


def leaf_map(release: SpatialLike) -> list[str]:
    """The leaves of a 2-D spatial release shaded by noisy density."""
    if len(release.columns) != 2:
        return [f"<p>No leaf map: the release has {len(release.columns)} column(s), a map needs two.</p>"]
    if release.n_leaves > MAX_LEAVES:
        return [f"<p>No leaf map: {release.n_leaves:,} leaves (at most {MAX_LEAVES:,} are drawn).</p>"]
    (x0, x1), (y0, y1) = release.metadata()["bounds"]
    lo, hi = np.asarray(release.lo, dtype=np.float64), np.asarray(release.hi, dtype=np.float64)
    area = np.maximum((hi[:, 0] - lo[:, 0]) * (hi[:, 1] - lo[:, 1]), 1e-300)
    density = np.maximum(np.asarray(release.count, dtype=np.float64), 0) / area
    shade = (density / (density.max() or 1.0) * 255).round().astype(int)
    size = 600
    sx, sy = size / (x1 - x0), size / (y1 - y0)
    rects = "".join(
        f'<rect x="{(a - x0) * sx:.1f}" y="{(y1 - d) * sy:.1f}" width="{(b - a) * sx:.1f}" '
        f'height="{(d - c) * sy:.1f}" fill="rgb({255 - s},{255 - s // 2},255)"/>'
        for a, b, c, d, s in zip(lo[:, 0], hi[:, 0], lo[:, 1], hi[:, 1], shade, strict=True))
    title = f"{release.n_leaves:,} leaves, shaded by noisy density ({release.columns[0]} across, " \
            f"{release.columns[1]} up)"
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" role="img" '
            f'stroke="#999" stroke-width="0.3"><title>{_esc(title)}</title>{rects}</svg><p>{_esc(title)}</p>']


def top_strings(release: SequenceLike) -> list[str]:
    """The most frequent strings with one-std error bars."""
    top = release.top_k(TOP)
    if top.height == 0:
        return ["<p>No string has a positive estimated frequency.</p>"]
    strings = top["string"].to_list()
    freq, std = cast(tuple[np.ndarray, np.ndarray], release.frequencies(strings, std=True))
    labels = [" ".join(map(str, s)) if isinstance(s, list) else str(s) for s in strings]
    return [bar_chart(f"the {len(labels)} most frequent strings, ± one noise standard deviation", labels,
                      np.asarray(freq, dtype=np.float64), np.asarray(std, dtype=np.float64))]


def report_html(release: Reported, alpha: float = ALPHA) -> str:
    """The report page (module docstring) as text."""
    card = release_card(release, alpha)
    eps = card["epsilon"]
    rows = [("mechanism", f"{card['mechanism']['name']}: {card['mechanism']['paper']}"),
            ("privacy unit", f"{card['privacy_unit']} ({card['neighbours']}: {card['neighbour_relation']})"),
            ("epsilon", f"{eps['stated']:g}" + ("" if eps["effective"] is None
                                                 else f" (effective {eps['effective']:.10g})")),
            ("noise", card["noise"]["family"]), ("randomness", card["noise"]["random_source"]),
            ("version", f"polars-dp {card['library']['version']}"), ("created", card["created"]),
            ("verified", card["verified"]), ("checksum", card["checksum"])]
    warn = ""
    if card["not_for_publication"]:
        warn = (f'<p class="warn">Not for publication: '
                f'{_esc("; ".join(card["not_for_publication_reasons"]))}</p>')
    table = "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>" for k, v in rows)
    body = "".join(f"<figure>{f}</figure>" for f in release.report_figures(alpha))
    title = f"{card['release_type']} by {card['mechanism']['name']}, epsilon {eps['stated']:g}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
            f"<style>{STYLE}</style></head><body><h1>{_esc(title)}</h1>{warn}<h2>Release card</h2>"
            f"<table>{table}</table><h2>Figures</h2>{body}<h2>The card in full</h2>"
            f"<pre>{_esc(json.dumps(card, indent=1, default=str))}</pre></body></html>\n")


#: The file name extensions a report may be written under (it is HTML).
REPORT_SUFFIXES = (".html", ".htm")


def check_report_path(path: str | os.PathLike[str], what: str = "path") -> Path:
    """``path`` as a :class:`~pathlib.Path` if its extension is ``.html`` or ``.htm``; otherwise a
    :class:`~polars_dp.errors.ParameterError` (a report never overwrites a release or takes a
    name that says another format)."""
    out = Path(path)
    if out.suffix.lower() not in REPORT_SUFFIXES:
        raise ParameterError(f"{what} {str(path)!r}: the report is HTML; use a .html name",
                             parameter=what)
    return out


def write_report(release: Reported, path: str | os.PathLike[str], alpha: float = ALPHA) -> Path:
    """Write :func:`report_html` to ``path`` atomically (nothing half-written); returns the path.
    ``path`` must end in ``.html`` or ``.htm`` (:func:`check_report_path`)."""
    check_report_path(path)
    text = report_html(release, alpha)
    return write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), suffix=".html.tmp")


__all__ = ["BARS", "MAX_LEAVES", "REPORT_SUFFIXES", "TOP", "Reported", "bar_chart", "check_report_path",
           "report_html", "write_report"]
