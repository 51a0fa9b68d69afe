"""`python -m pipeline replay` on a few real days of the vendored MovieTweetings ratings: the real
chain, night after night, incremental (night 2 continues night 1's model on the one new day)."""
import datetime as dt
import json

import pytest

from pipeline import replay, run_config
from pipeline.contracts import manifest as M
from pipeline.contracts import serving
from pipeline.paths import RunPaths

pytestmark = pytest.mark.integration


def test_a_replay_runs_the_chain_records_what_was_served_and_continues_after_its_last_night(tiny_config, tmp_path):
    from pipeline.datagen import ratings_import

    raw = tmp_path / "raw"
    assert ratings_import.main(["--out", str(raw), "--start", "2013-08-28", "--end", "2013-08-31"]) == 0
    sets = {k: v for k, v in run_config.flat(tiny_config).items() if not k.startswith("data.")}
    # Every candidate is blessed (no floor, no drop or lift rule): night 2 pushes version 2.
    sets.update({"window.train_days": 2, "train.epochs": 1, "train.workers": 1, "eval.min_auc": 0.0,
                 "eval.max_auc_drop": None, "eval.min_lift_over_baseline": None, "train.incremental": True})
    work = tmp_path / "replay"
    config = replay.replay_config(work, raw, None, sets)
    start = dt.date(2013, 8, 30)
    first = replay.run(config, work, start, 1)                    # then "killed"
    state = replay.run(config, work, start, 2)                    # continues with night 2 only
    nights = state["nights"]
    assert [n["date"] for n in nights] == ["2013-08-30", "2013-08-31"]
    assert nights[0] == first["nights"][0]                        # night 1 was not run again
    one, two = nights
    assert one["verdict"] == "BLESSED" and one["pushed"] and one["served_version"] == 1
    assert set(one["seconds"]) == {*replay.STEPS, "push"} and one["bytes_written"] > 0
    # Night 2 judges night 1's choice on day 2: the served model's AUC there is the gate's bet.
    assert two["served_auc"] == pytest.approx(two["next_day"]["gate"], abs=1e-6)
    assert two["next_day"]["always_push"] == two["next_day"]["gate"] == two["aucs"][start.isoformat()]
    assert two["next_day"]["popularity"] == pytest.approx(two["popularity_auc"], abs=1e-6)
    assert set(state["summary"]) == set(replay.P.POLICIES)
    saved = json.loads((work / "replay.json").read_text())
    assert saved["nights"] == nights and (work / "replay.png").stat().st_size > 0
    assert "| gate |" in (work / "replay.md").read_text()

    # Night 1 had nothing to continue; night 2 transformed and trained on 08-30 only (night 1's
    # eval day), starting from version 1, and says so in its model card.
    runs = work / "artifacts" / "runs"
    plan1, plan2 = (M.read(runs / d / replay.RUN_ID / "examples") for d in ("2013-08-30", "2013-08-31"))
    assert plan1["training_plan"]["mode"] == "full" and plan1["training_plan"]["train_dates"] == [
        "2013-08-28", "2013-08-29"]
    assert plan2["training_plan"] | {"reason": ""} == {"mode": "incremental", "train_dates": ["2013-08-30"],
                                                       "models_since_full": 1, "served_version": 1, "reason": ""}
    assert plan2["splits"]["train"]["examples"] == plan1["splits"]["eval"]["examples"]
    card = json.loads((runs / "2013-08-31" / replay.RUN_ID / "train" / "model_card.json").read_text())
    assert card["training"]["mode"] == "incremental" and card["metrics"]["warm_start_variables"] > 0
    logs = [(runs / d / replay.RUN_ID / "train" / "logs" / "worker-0.log").read_text() for d in ("2013-08-30",
                                                                                                "2013-08-31")]
    assert "image code fitted" in logs[0] and "image code kept from the warm start" in logs[1]   # no second fit

    # Killed after night 2's push, before its record: a resumed replay first re-serves what night 1
    # left (version 1), so the re-run night 2 is judged against night 1's model, not its own first
    # candidate. Resuming with night 2 still to run re-serves before it trains; resuming with
    # nothing left to run shows the same re-serve without training night 2 again.
    assert two["pushed"] and two["served_version"] == 2
    (work / "replay.json").write_text(json.dumps(first))           # the record as night 1 left it
    replay.run(config, work, start, 1)
    base = RunPaths.for_run(config, "2013-08-31", replay.RUN_ID).model_base
    served = serving.version_dir(base, serving.served_version(base))       # a rollback re-publishes
    weights = {v: (serving.version_dir(base, v) / "variables/variables.data-00000-of-00001").read_bytes()
               for v in (1, 2)}
    assert served.name == "3" and weights[1] != weights[2]
    assert (served / "variables/variables.data-00000-of-00001").read_bytes() == weights[1]
    replay.run(config, work, start, 1)                            # resumed again: already re-served
    assert serving.served_version(base) == 3
