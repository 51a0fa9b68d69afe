"""`python -m bench window_cost`: what a night costs against the training window.

For windows of 1, 7 and 14 days of the same daily volume (the demo generator's world), two
consecutive nights through the replay (the DAG's step code, pipeline/replay.py) with incremental
training on (`train.incremental`): night 1 has no model to continue, so it is a cold full retrain
on the whole window; night 2 continues night 1's model on the one new day (a warm, incremental
night). Per night: validate, preprocess, stage and train seconds and the bytes written. The
reference is the same window's cold night, measured in the same run.

Goals (issue 45): the 7-day window's warm night costs <= 0.35x its cold night (preprocess + stage +
train), and the 14-day window's warm night <= 1.3x the 7-day window's warm night (a night's cost
follows the new day, not the window). Training runs `--epochs` epochs (default 1): the cost per
epoch is what grows with the window; the model's quality is measured by the replays
(`python -m bench.lab.replay --mode incremental`), not here.
"""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from bench.common import write_result

log = logging.getLogger("bench.window_cost")
WINDOWS = (1, 7, 14)
EVENTS_PER_DAY = 20_000
FIRST_NIGHT = dt.date(2026, 11, 20)
COST_STEPS = ("preprocess", "stage", "train")
GOAL_WARM_OVER_COLD_7 = 0.35
GOAL_WARM14_OVER_WARM7 = 1.3


def two_nights(root: Path, window: int, events_per_day: int, epochs: int) -> list[dict]:
    """The cold and the warm night's records for one window size."""
    from pipeline import replay
    from pipeline.datagen.generator import generate

    raw = root / "raw"
    generate(raw, FIRST_NIGHT - dt.timedelta(days=window), window + 2, events_per_day=events_per_day,
             with_ceiling=False)
    sets = {"window.train_days": window, "train.incremental": True, "train.epochs": epochs,
            "eval.min_auc": 0.0, "eval.min_lift_over_baseline": None, "eval.max_auc_drop": None}
    config = replay.replay_config(root / "work", raw, None, sets)
    nights = replay.run(config, root / "work", FIRST_NIGHT, 2)["nights"]
    if not nights[0].get("pushed"):
        raise RuntimeError(f"window {window}: night 1 was not pushed, so night 2 has nothing to continue")
    return nights


def _cost(night: dict, plan: str) -> dict:
    seconds = {s: night["seconds"].get(s, 0.0) for s in COST_STEPS}
    return {"plan": plan, **seconds, "total_s": sum(seconds.values()), "validate_s": night["seconds"]["validate"],
            "bytes_written": night["bytes_written"]}


def figures_of(rows: dict[int, tuple[dict, dict]], events_per_day: int, epochs: int) -> dict:
    out: dict = {"events_per_day": events_per_day, "epochs": epochs, "windows": list(rows),
                 "goal_warm_over_cold_7": GOAL_WARM_OVER_COLD_7, "goal_warm14_over_warm7": GOAL_WARM14_OVER_WARM7}
    for window, (cold, warm) in rows.items():
        for name, cost in (("cold", cold), ("warm", warm)):
            out.update({f"{name}_{k}_{window}d": v for k, v in cost.items()})
        out[f"warm_over_cold_{window}d"] = warm["total_s"] / cold["total_s"]
    if {7, 14} <= set(rows):
        out["warm14_over_warm7"] = out["warm_total_s_14d"] / out["warm_total_s_7d"]
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.window_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS))
    parser.add_argument("--events-per-day", type=int, default=EVENTS_PER_DAY)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args(argv if argv is not None else [])
    from pipeline.contracts import manifest as M
    from pipeline.replay import RUN_ID

    rows = {}
    for window in args.windows:
        root = Path(tempfile.mkdtemp(prefix=f"bench-window-{window}d-"))
        try:
            cold, warm = two_nights(root, window, args.events_per_day, args.epochs)
            plans = [M.read(root / "work" / "artifacts" / "runs" / n["date"] / RUN_ID / "examples")["training_plan"]
                     for n in (cold, warm)]
            rows[window] = (_cost(cold, plans[0]["mode"]), _cost(warm, plans[1]["mode"]))
            log.info("window %d d: cold %s, warm %s", window, rows[window][0], rows[window][1])
        finally:
            shutil.rmtree(root, ignore_errors=True)
    result = figures_of(rows, args.events_per_day, args.epochs)
    for window, (cold, warm) in rows.items():
        print(f"{window:>2} d window: cold ({cold['plan']}) {cold['total_s']:.1f} s, warm ({warm['plan']}) "
              f"{warm['total_s']:.1f} s: ratio {result[f'warm_over_cold_{window}d']:.2f}")
    write_result(result_name(args.events_per_day), result)
    return result


def result_name(events_per_day: int) -> str:
    """`window_cost` at the default daily volume, `window_cost_<N>k` at another: the fixed part of
    a night (process starts, graph builds, export) weighs less as the day grows, so the ratio is
    reported per volume."""
    return "window_cost" if events_per_day == EVENTS_PER_DAY else f"window_cost_{events_per_day // 1000}k"


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main(sys.argv[1:])
