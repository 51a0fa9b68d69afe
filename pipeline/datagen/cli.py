"""`python -m pipeline generate-data` (also the `reco-generate-data` console script)."""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
from pathlib import Path

from pipeline.config import load_config
from pipeline.datagen.generator import generate
from pipeline.datagen.regimes import PRESETS

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline generate-data",
        description="Write synthetic date-partitioned events and item snapshots (docs/data.md).",
    )
    parser.add_argument("--config", help="params file (default conf/params.yaml)")
    parser.add_argument("--start", type=dt.date.fromisoformat, help="first date, YYYY-MM-DD")
    parser.add_argument("--end", type=dt.date.fromisoformat, help="last date (default: yesterday)")
    parser.add_argument("--days", type=int, default=8, help="number of days ending at --end")
    parser.add_argument("--out", type=Path, help="raw data root (default: config data.raw_root)")
    parser.add_argument("--events-per-day", type=int)
    parser.add_argument("--users", type=int)
    parser.add_argument("--items", type=int)
    parser.add_argument("--ctr", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--regime", choices=list(PRESETS),
                        help="kind of world (default: config generator.regime; docs/data.md lists them)")
    parser.add_argument("--fault", action="append", default=[], metavar="DATE=SPEC",
                        help="plant a fault, e.g. 2026-11-03=shuffled_labels or 2026-11-04=malformed:0.05")
    return parser


def parse_faults(values: list[str]) -> dict[dt.date, list[str]]:
    faults: dict[dt.date, list[str]] = {}
    for value in values:
        day, sep, spec = value.partition("=")
        if not sep:
            raise ValueError(f"--fault {value!r}: expected DATE=SPEC")
        faults.setdefault(dt.date.fromisoformat(day), []).append(spec)
    return faults


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    cfg = load_config(args.config)
    gen = cfg.generator
    end = args.end or (args.start + dt.timedelta(days=args.days - 1) if args.start
                       else dt.date.today() - dt.timedelta(days=1))
    start = args.start or end - dt.timedelta(days=args.days - 1)
    report = generate(
        raw_root=args.out or cfg.data.raw_root,
        start=start,
        days=(end - start).days + 1,
        users=args.users or gen.users,
        items=args.items or gen.items,
        events_per_day=args.events_per_day or gen.events_per_day,
        ctr=args.ctr or gen.ctr,
        seed=gen.seed if args.seed is None else args.seed,
        faults=parse_faults(args.fault),
        regime=args.regime or gen.regime,
    )
    sys.stdout.write(report.to_json() + "\n")
    log.info("ceiling AUC (logistic regression on the true hidden factors): %.3f", report.ceiling_auc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
