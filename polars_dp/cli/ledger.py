"""``polars-dp ledger budget.ledger``: the datasets of a budget ledger and their charges."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars_dp as pdp
from polars_dp.cli.common import BadInput

EXAMPLES = """\
examples:
  polars-dp ledger budget.ledger
  polars-dp ledger budget.ledger --dataset people --json | jq .people.remaining
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "ledger", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="show a budget ledger: each dataset's total, spent and remaining epsilon and its charges",
        description="Verify a budget ledger file (its hash chain) and show each dataset's total, the exact "
                    "epsilon spent and left, and every charge (label, mechanism, noise, domain fingerprint).")
    p.add_argument("ledger", metavar="FILE")
    p.add_argument("--dataset", metavar="NAME", help="show this dataset only")
    p.add_argument("--json", action="store_true", help="print one JSON object (exact values as 'n/d')")


def run(args: argparse.Namespace) -> int:
    if not Path(args.ledger).is_file():
        raise BadInput(f"no ledger file at {args.ledger}")
    datasets = pdp.Ledger(args.ledger).datasets()
    if args.dataset is not None:
        if args.dataset not in datasets:
            raise BadInput(f"dataset {args.dataset!r} is not in {args.ledger}; its datasets: "
                           f"{', '.join(datasets) or 'none'}")
        datasets = {args.dataset: datasets[args.dataset]}
    if args.json:
        print(json.dumps({name: budget.to_json() for name, budget in datasets.items()}, indent=2))
        return 0
    print(f"{args.ledger}: {len(datasets)} dataset(s), hash chain verified")
    for budget in datasets.values():
        unit = "" if budget.id_column is None else f", individual {budget.id_column!r}"
        print(f"  {budget.name}: total {float(budget.total):g} (neighbours {budget.neighbours}{unit}), spent "
              f"{float(budget.spent):.6g}, remaining {float(budget.remaining):.6g} "
              f"[exactly {budget.spent} of {budget.total}]")
        for c in budget.charges:
            print(f"    {c['time']}  {c['epsilon_float']:<10.6g} {c['label']}  "
                  f"({c.get('mechanism') or '-'}, noise {c.get('noise') or '-'}, domain "
                  f"{(c.get('domain') or '-')[:12]})")
    return 0
