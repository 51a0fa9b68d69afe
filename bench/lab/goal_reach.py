"""`python -m bench.lab.goal_reach`: where the regime goal sits against what the data can show, as the window grows.

The regime goal (bench/lab/quality.py `GOAL_REGIMES`) is relative: the model must beat the best
baseline and the window's item popularity by fixed margins. Those baselines get better with
more data; the ceilings do not move: bench/lab/ceilings.py's `content` (every item known by its
true appeal and factors, a user through the request's history) and the generator's (every
user's hidden taste known too). Where the goal's AUC is above `content`, a model must know items
better than their true factors or users better than their histories show; above the
generator's ceiling, more than the world holds.

For each regime and events per day this generates the window and eval day, fits the baselines
(bench/lab/baselines.py) and the ceilings, and records the AUC the goal asks for beside them. No
model is trained (bench/lab/quality.py measures the model at demo size): a grid of every regime at
three sizes takes minutes, and the goal's position does not depend on the model.
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from bench.common import GOAL_REACH_EVENTS_PER_DAY, write_result
from bench.lab.baselines import baselines
from bench.lab.quality import GOAL_REGIMES, generated, world_ceilings
from bench.report import regime_lift_asked
from pipeline.datagen.regimes import REGIMES

log = logging.getLogger("bench.lab.goal_reach")


def goal_auc(base: dict[str, dict[str, float]], content_ceiling: float) -> float:
    """The AUC `GOAL_REGIMES` asks of a model on data whose baselines score `base`."""
    best = max(figures["auc"] for figures in base.values())
    return best + regime_lift_asked(GOAL_REGIMES, best, content_ceiling)


def reach(work: Path, regime: str, events_per_day: int) -> dict[str, float | int | str]:
    """Baselines, the goal and the ceilings of one regime and size; keys end in `<regime>_<events_per_day>`."""
    config, paths, report = generated(work, f"{regime}-{events_per_day}",
                                      {"generator.events_per_day": events_per_day, "generator.regime": regime})
    base = baselines(paths)
    best = max(base, key=lambda k: base[k]["auc"])
    ceilings = world_ceilings(config, paths)
    goal = goal_auc(base, ceilings["content"])
    key = f"{regime}_{events_per_day}"
    figures = {f"regime_{key}": regime, f"events_per_day_{key}": events_per_day,
               f"window_rows_{key}": events_per_day * config.window.train_days,
               f"auc_item_ctr_{key}": base["item_ctr"]["auc"], f"auc_best_baseline_{key}": base[best]["auc"],
               f"best_baseline_{key}": best, f"goal_auc_{key}": goal, f"ceiling_auc_{key}": report.ceiling_auc,
               f"ceiling_appeal_auc_{key}": ceilings["appeal"], f"ceiling_content_auc_{key}": ceilings["content"],
               f"goal_over_content_{key}": goal - ceilings["content"],
               f"goal_over_ceiling_{key}": goal - report.ceiling_auc}
    log.info("%s: goal %.4f, content ceiling %.4f, generator ceiling %.4f", key, goal, ceilings["content"],
             report.ceiling_auc)
    return figures


def main(argv: list[str] | None = None) -> dict:
    """Every regime at every size of `GOAL_REACH_EVENTS_PER_DAY` (the doc's table has a row for each)."""
    parser = argparse.ArgumentParser(prog="python -m bench.lab.goal_reach", description=__doc__.split("\n\n")[0])
    parser.parse_args(argv or [])      # --help only: the run takes no options
    figures: dict = {"goal_regimes": GOAL_REGIMES}
    with tempfile.TemporaryDirectory(prefix="bench-goal-reach-") as tmp:
        for regime in REGIMES:
            for per_day in GOAL_REACH_EVENTS_PER_DAY:
                figures.update(reach(Path(tmp) / f"{regime}-{per_day}", regime, per_day))
    write_result("goal_reach", figures)
    return figures


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main(sys.argv[1:])
