"""``polars-dp card release.parquet``: the release card, as text, JSON or YAML."""

from __future__ import annotations

import argparse
import json
from typing import Any

from polars_dp.cli.common import open_release

EXAMPLES = """\
examples:
  polars-dp card release.parquet
  polars-dp card release.parquet --json --alpha 0.01 > card.json
  polars-dp card release.parquet --yaml > card.yaml
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "card", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="print a release's card: what a publisher puts next to the numbers",
        description="Print the release card: mechanism and paper, privacy unit and neighbour relation, "
                    "epsilon (stated and effective), noise and random source, public domain and parameters, "
                    "pre-processing rules, accuracy at --alpha for the default workload, version, seeding, "
                    "verification and checksum, with the OpenDP deployments registry's field names.")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the whole card as one JSON object")
    fmt.add_argument("--yaml", action="store_true", help="print the whole card as a YAML document")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="the accuracy statements hold with probability 1 - alpha (default 0.05)")


def _yaml_flow(value: Any) -> str:
    """A YAML 1.2 flow value: ``{}`` / ``[]`` for an empty table or list, else JSON's spelling of
    numbers, booleans, null and (double-quoted) strings."""
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    if isinstance(value, float) and value != value:
        return ".nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    return json.dumps(value if isinstance(value, (str, int, float, bool)) or value is None else str(value))


def to_yaml(value: Any, indent: int = 0) -> list[str]:
    """``value`` (dicts, lists and scalars, as a card holds) as YAML block-style lines."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines += [f"{pad}{json.dumps(str(key))}:", *to_yaml(item, indent + 2)]
            else:
                lines.append(f"{pad}{json.dumps(str(key))}: {_yaml_flow(item)}")
        return lines
    if isinstance(value, list) and value:
        lines = []
        for item in value:
            first, *rest = to_yaml(item, indent + 2)
            lines += [f"{pad}- {first.lstrip()}", *rest]
        return lines
    return [pad + _yaml_flow(value)]


def _figure(figure: dict[str, Any]) -> str:
    if figure.get("std") is None:
        return "no exact error bar"
    return f"std {figure['std']:.4g}, within +/-{figure['accuracy']:.4g}"


def accuracy_lines(accuracy: dict[str, Any]) -> list[str]:
    """The accuracy section as text lines."""
    if not accuracy.get("available"):
        return [f"no exact error bar: {accuracy.get('reason')}"]
    alpha = accuracy["alpha"]
    lines = [f"(noise within the bound with probability {1 - alpha:g})"]
    for key, value in accuracy.items():
        if isinstance(value, dict) and "std" in value:
            lines.append(f"{key.replace('_', ' ')}: {_figure(value)}")
    for r in accuracy.get("worst_single_attribute_range", []):
        lines.append(f"worst range of {r['column']} ({r['first']}..{r['last']}): {_figure(r)}")
    return lines


def run(args: argparse.Namespace) -> int:
    release = open_release(args.release, args.unverified)
    card = release.card(alpha=args.alpha)
    if args.json:
        print(json.dumps(card, indent=2, default=str))
        return 0
    if args.yaml:
        print("\n".join(["%YAML 1.2", "---", *to_yaml(card)]))
        return 0
    eps = card["epsilon"]
    effective = "" if eps["effective"] is None else f" (effective {eps['effective']:.10g})"
    rows = [
        ("publication", "NOT FOR PUBLICATION: " + "; ".join(card["not_for_publication_reasons"])
         if card["not_for_publication"] else "fit for publication (exact noise, not seeded, verified)"),
        ("mechanism", f"{card['mechanism']['name']}: {card['mechanism']['paper']}"),
        ("privacy unit", f"{card['privacy_unit']}; {card['neighbours']}: {card['neighbour_relation']}"),
        ("epsilon", f"{eps['stated']:g}{effective}"),
        ("noise", card["noise"]["family"]),
        ("randomness", card["noise"]["random_source"]),
    ]
    domain = release.domain_lines() or ["(not stated)"]  # as `polars-dp info` shows it
    rows += [("domain" if i == 0 else "", line) for i, line in enumerate(domain)]
    rows.append(("preprocessing", ", ".join(f"{k} = {v}" for k, v in card["preprocessing"].items())
                 or "(none)"))
    rows += [("accuracy" if i == 0 else "", line) for i, line in enumerate(accuracy_lines(card["accuracy"]))]
    rows += [("version", f"polars-dp {card['library']['version']}"), ("created", card["created"]),
             ("checksum", card["checksum"])]
    print(f"{args.release}: release card ({card['release_type']})")
    for key, value in rows:
        print(f"  {key:<14} {value}")
    return 0
