"""`python -m bench.lab.replay --world drifting|movietweetings`: the nightly loop replayed over weeks,
judged by what users would have been served (pipeline/replay.py), with the simple baseline the
model must beat scored on the same nights.

drifting: the generator's drifting world (items arrive and retire, appeal trends, users come
and go, tastes move) at demo size, 3-day window. movietweetings: the vendored real ratings
(data/movietweetings-100k) imported by real UTC day, 14-day window. Per night, beside the
replay's own figures: logistic regression on item + history + user (bench/lab/baselines.py) trained
on the same window, and the drifting world's ceilings. Writes bench/results/replay_<world>.json
and docs/images/replay_<world>.png; figures in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import shutil
import statistics
import sys
from pathlib import Path

from bench.common import write_result
from pipeline import replay, run_config
from pipeline.config import PROJECT_ROOT
from pipeline.paths import RunPaths

log = logging.getLogger("bench.lab.replay")
# Training modes: the full-window retrain every night (the default), or incremental: warm start
# from the served model, trained on the new days only (pipeline/contracts/training_plan.py).
MODES = {"full": {}, "incremental": {"train.incremental": True}}
WORLDS = {
    # first data date, nights, config overrides
    "drifting": (dt.date(2026, 11, 4), 14, {"generator.regime": "drifting", "window.train_days": 3}),
    # the log starts mid-day on 02-28: the first window starts on the first whole day, 03-02
    "movietweetings": (dt.date(2013, 3, 16), 30, {"window.train_days": 14}),
}


# The policies a team could run instead of the gate (the oracle needs tomorrow's labels).
PRACTICAL = ("push_unless_worse", "keep_unless_better", "better_with_confidence", "always_push", "never_retrain",
             "popularity")
GOALS = {"goal_rule_minus_best_other": -0.002, "goal_regret_to_oracle": 0.005,
         "goal_rule_minus_popularity": 0.02, "goal_above_popularity_share": 0.8, "goal_rule_minus_lr": 0.01}
# The gate's default rule (eval.max_auc_drop 0, eval.drop_needs_significance false), as the
# replays chose it: docs/benchmarks.md, "What the replays decided".
DEFAULT_RULE = "keep_unless_better"


def prepare(world: str, raw: Path, start: dt.date, nights: int, train_days: int) -> None:
    """The raw partitions the replay reads: generated, or imported from the vendored ratings."""
    if world == "drifting":
        from pipeline.datagen.generator import generate

        first = start - dt.timedelta(days=train_days)
        generate(raw, first, train_days + nights, regime="drifting", with_ceiling=False)
    else:
        from pipeline.datagen import ratings_import

        first, last = start - dt.timedelta(days=train_days), start + dt.timedelta(days=nights)
        ratings_import.main(["--out", str(raw), "--start", first.isoformat(), "--end", last.isoformat()])


def baseline_aucs(config, state: dict) -> dict[str, float | None]:
    """Logistic regression on item + history + user, per night, trained on that night's window."""
    from bench.lab.baselines import baselines

    out = {}
    for n in state["nights"]:
        paths = RunPaths.for_run(config, n["date"], replay.RUN_ID)
        try:
            out[n["date"]] = baselines(paths)["lr_item_history_user"]["auc"]
        except (ValueError, OSError) as err:       # a day with one label class or no events
            log.warning("baseline for %s: %s", n["date"], err)
            out[n["date"]] = None
    return out


def figures(world: str, state: dict, lr: dict[str, float | None], rule: str = DEFAULT_RULE) -> dict:
    """The replay's figures; the goal rows judge `rule`, the gate's default rule (a replay run
    under another default still holds its nights: every rule is replayed on the same candidates)."""
    summary, nights = state["summary"], state["nights"]
    out: dict = {"world": world, "nights": len(nights), "first_date": nights[0]["date"],
                 "last_date": nights[-1]["date"], "rule": rule}
    for policy, s in summary.items():
        out.update({f"{policy}_mean_next_day_auc": s["mean_next_day_auc"],
                    f"{policy}_regret_to_oracle": s["regret_to_oracle"], f"{policy}_nights": s["nights"]})
    # the nights that have a next day: the served model judged on day t+1, against the baselines there
    pairs = [(n["next_day"].get(rule), n["next_day"].get("popularity"), lr.get(n["date"])) for n in nights[1:]]
    pairs = [p for p in pairs if None not in p]
    if pairs:
        out.update({
            "rule_minus_popularity_mean": statistics.mean(g - p for g, p, _ in pairs),
            "rule_above_popularity_share": sum(g > p for g, p, _ in pairs) / len(pairs),
            "lr_item_history_user_mean": statistics.mean(b for _, _, b in pairs),
            "rule_minus_lr_mean": statistics.mean(g - b for g, _, b in pairs),
        })
    others = {p: summary[p]["mean_next_day_auc"] for p in PRACTICAL
              if p != rule and summary[p]["mean_next_day_auc"] is not None}
    best = max(others, key=others.get)
    out.update({"rule_mean_next_day_auc": summary[rule]["mean_next_day_auc"],
                "rule_regret_to_oracle": summary[rule]["regret_to_oracle"],
                "best_other_policy": best, "best_other_mean": others[best],
                "rule_minus_best_other": summary[rule]["mean_next_day_auc"] - others[best], **GOALS})
    out["train_s_per_night"] = statistics.mean(n["seconds"].get("train", 0.0) for n in nights)
    out["night_s_median"] = statistics.median(sum(n["seconds"].values()) for n in nights)
    out["per_night"] = [{"date": n["date"], "candidate_auc": n.get("candidate_auc"), "served_auc": n.get("served_auc"),
                         "popularity_auc": n.get("popularity_auc"), "verdict": n.get("verdict") or n.get("refused"),
                         "served_version": n.get("served_version"), "next_day": n["next_day"],
                         "lr_item_history_user_auc": lr.get(n["date"]), "seconds": n["seconds"]} for n in nights]
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", choices=sorted(WORLDS), required=True)
    parser.add_argument("--mode", choices=sorted(MODES), default="full", help="training mode (default full)")
    parser.add_argument("--nights", type=int, help="default: the world's (drifting 14, movietweetings 30)")
    parser.add_argument("--work", type=Path, help="the replay's folder (kept, resumable); default var/bench-replay-W")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--report-only", action="store_true",
                        help="figures from the work folder's replay.json, without replaying a night")
    args = parser.parse_args(argv if argv is not None else [])
    from pipeline.cli import parse_sets

    start, nights, sets = WORLDS[args.world]
    nights = args.nights or nights
    name = args.world + ("" if args.mode == "full" else f"_{args.mode}")
    work = (args.work or PROJECT_ROOT / "var" / f"bench-replay-{name}").resolve()
    raw = work / "raw"
    config = replay.replay_config(work, raw, None, {**sets, **MODES[args.mode], **parse_sets(args.set)})
    if args.report_only:
        state = json.loads((work / "replay.json").read_text())
    else:
        if not raw.exists():    # the full window's days, whatever the mode trains on
            prepare(args.world, raw, start, nights, sets["window.train_days"])
        state = replay.run(config, work, start, nights)
    result = figures(args.world, state, baseline_aucs(config.with_overrides(sets), state))
    result["mode"] = args.mode
    result["config_digest"] = run_config.digest(config)
    images = PROJECT_ROOT / "docs" / "images"
    images.mkdir(exist_ok=True)
    shutil.copyfile(work / "replay.png", images / f"replay_{name}.png")
    write_result(f"replay_{name}", result)
    return result


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main(sys.argv[1:])
