"""Every recorded parameter is verified on read: an edit is refused even with the checksum fixed.

The checksum detects accidents, not edits (whoever edits a file can recompute it), so
:func:`polars_dp.read_release` must refuse a release whose record disagrees with itself: every
header field, every ``params`` entry (nested values included) and every entry of the release
type, changed alone and the checksum recomputed (:func:`tests.helpers.privacy.edited_table`), for
every registered mechanism.  The exceptions, :data:`UNVERIFIABLE`, are the entries that nothing
else in a release depends on, so that an edited file is a release someone could have made: they
are named here with the reason.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import polars_dp as pdp
from polars_dp.errors import ReleaseFormatError
from polars_dp.kernels.morton import MortonLayout
from polars_dp.noise import NEIGHBOURS
from polars_dp.plans import known_mechanisms
from polars_dp.releases.metadata import NOISE_KINDS
from polars_dp.releases.spatial import SpatialRelease
from polars_dp.releases.tree_levels import TopLevels
from tests.helpers.privacy import CASES, edited_table

#: Entries an edit of which cannot be detected, and why (``case:entry`` for one case only).
UNVERIFIABLE = {
    "created": "when it was written: any time is possible",
    "version": "the writer's version: any version writing this format is possible",
    "seeded": "whether a seed made the noise: seeded draws look like any others",
    "params.theta": "PrivTree's threshold: any threshold keeps the guarantee and leaves no other trace",
    "params.max_nodes": "the sequence tree's public node cap: unless the tree was capped, any cap above "
                        "its size gives the same release",
    "params.length_counts[0]": "a published noisy count: another value is another draw of the noise",
    "adaptive_grid:params.c": "AG's first-level side is max(10, ...): at this small n nothing depends on c",
    "adaptive_grid:params.n_used": "likewise for the noisy N (published: another value is another draw)",
    "adaptive_grid:params.c2": "AG's second-level sides follow c2 and the first-level noisy counts, which "
                               "are not published",
}


RELEASES: dict[str, Any] = {}


def _release(case) -> Any:
    if case.id not in RELEASES:
        RELEASES[case.id] = case.run(seed=4, epsilon=2.0)  # a sequence tree of 17 nodes
    return RELEASES[case.id]


CHOICES = [tuple(NEIGHBOURS), tuple(NOISE_KINDS), known_mechanisms(), ("sum_then_clip", "clip_then_sum"),
           ("grid", "tree", "sequence_model"), ("morton", "grid", "two_level_grid")]


def _other(value: Any) -> Any:
    """One edit of a JSON value: another choice, another number, another text."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 4 + 1
    if isinstance(value, float):  # an integer stays one (counts): an edit no rounding rule refuses
        return value * 4 + (1.0 if value == round(value) else 0.25)
    if isinstance(value, str):
        for choices in CHOICES:
            if value in choices:
                return next(c for c in choices if c != value)
        fraction = re.fullmatch(r"(\d+)/(\d+)", value)
        if fraction:
            return f"{int(fraction[1]) * 4 + 1}/{fraction[2]}"
        return value + " (edited)"
    if isinstance(value, list):
        return [_other(value[0]), *value[1:]] if value else [0]
    raise AssertionError(f"no edit for {value!r}")


def _paths(value: Any, name: str = "", path: tuple[Any, ...] = ()) -> list[tuple[str, tuple[Any, ...]]]:
    """Every edited leaf: objects entry by entry, lists of objects or lists at their first
    element, lists of numbers or texts edited at their first element."""
    if isinstance(value, dict):
        out = []
        for key, v in value.items():
            if not path and key == "checksum":
                continue
            out += _paths(v, f"{name}.{key}" if name else key, (*path, key))
        return out
    if isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        return _paths(value[0], f"{name}[0]", (*path, 0))
    return [(name + ("[0]" if isinstance(value, list) else ""), path)]


def _edit(path: tuple[Any, ...]):
    def edit(meta: dict[str, Any]) -> None:
        target = meta
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = _other(target[path[-1]])
    return edit


def _cases():
    for case in CASES:
        for name, path in _paths(_decoded(_release(case))):
            reason = UNVERIFIABLE.get(f"{case.id}:{name}", UNVERIFIABLE.get(name))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            yield pytest.param(case, path, id=f"{case.id}:{name}", marks=marks)


def _decoded(release) -> dict[str, Any]:
    out = {}
    for k, v in release.export_metadata().items():
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_an_unedited_release_reads_back_equal(case, noise):
    """Every entry a mechanism records is one the reader expects (a writer and its reader agree)."""
    release = _release(case) if noise == "exact" else case.run(seed=4, epsilon=2.0, noise="float")
    assert pdp.read_release(edited_table(release, lambda meta: None)) == release


@pytest.mark.parametrize(("case", "path"), list(_cases()))
def test_an_edited_entry_is_refused(case, path):
    table = edited_table(_release(case), _edit(path))
    with pytest.raises(ReleaseFormatError):
        pdp.read_release(table)


def test_counted_level_scales_edited_consistently_are_refused():
    """The level scales changed everywhere they are stored (``params.level_noise_scales``, the
    ``levels`` entry) and the inference redone with them, the file then written normally (a
    valid checksum): refused, as the plan gives other scales."""
    release = _release(next(c for c in CASES if c.id == "privtree_levels"))
    top, layout = release.levels, release.layout
    scales = [4 * s for s in top.scales]
    morton = MortonLayout(release.box.d, layout["bits"], layout["split_bits"])
    levels = TopLevels.infer(release.codes, release.depth, morton, top.levels, top.noisy, scales,
                             top.noisy_leaves, top.leaf_scale, release.noise)
    edited = SpatialRelease(release.box, release.lo, release.hi, release.depth, levels.leaf_counts(),
                            codes=release.codes, layout=layout, mechanism=release.mechanism,
                            epsilon=release.epsilon, neighbours=release.neighbours,
                            params={**release.params, "level_noise_scales": scales}, noise=release.noise,
                            seeded=release.seeded, noise_model=release.noise_model, levels=levels)
    with pytest.raises(ReleaseFormatError, match="level_noise_scales"):
        pdp.read_release(edited.to_arrow())


@pytest.mark.parametrize(("entry", "value"), [("seeded", False), ("ledger", {"total_epsilon": 1.0,
                                              "neighbours": "replace", "entries": []})])
def test_annotations_that_disagree_with_the_header_are_refused(entry, value):
    """What the command line (``params.seeded``) and a Session (``params.ledger``) add must agree
    with the header (a seeded release; add/remove neighbours)."""
    release = _release(next(c for c in CASES if c.id == "uniform_grid"))
    right = {"seeded": True, "ledger": {"total_epsilon": 1.0, "neighbours": "add_remove", "entries": []}}
    annotated = edited_table(release, lambda meta: meta["params"].update({entry: right[entry]}))
    assert pdp.read_release(annotated).params[entry] == right[entry]
    with pytest.raises(ReleaseFormatError, match=f"params.{entry}"):
        pdp.read_release(edited_table(release, lambda meta: meta["params"].update({entry: value})))
