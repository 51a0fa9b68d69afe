"""Tonight's training plan (full or incremental) from the served model's card, and its round trip
through the manifest."""
import datetime as dt
import json

from pipeline.contracts import serving
from pipeline.contracts import training_plan as TP

WINDOW = [dt.date(2026, 11, 1), dt.date(2026, 11, 2), dt.date(2026, 11, 3)]     # run date 11-04


def _card(run_date="2026-11-03", models=0):
    return {"run_date": run_date, "training": {"mode": "full" if not models else "incremental",
                                               "models_since_full": models}}


def test_off_or_nothing_served_is_a_full_retrain_on_the_window():
    assert TP.decide(False, 7, WINDOW, 3, _card()).mode == TP.FULL
    plan = TP.decide(True, 7, WINDOW, None, None)
    assert plan.mode == TP.FULL and plan.train_dates == tuple(d.isoformat() for d in WINDOW)
    assert plan.models_since_full == 0 and "no model is served" in plan.reason


def test_last_nights_model_is_continued_on_the_one_new_day():
    plan = TP.decide(True, 7, WINDOW, 5, _card("2026-11-03", models=2))
    assert plan.mode == TP.INCREMENTAL and plan.train_dates == ("2026-11-03",)
    assert plan.served_version == 5 and plan.models_since_full == 3


def test_a_model_from_two_nights_ago_is_continued_on_both_days_it_has_not_fitted():
    """A night the gate kept the older model: the days since it are new to it."""
    plan = TP.decide(True, 7, WINDOW, 5, _card("2026-11-02"))
    assert plan.mode == TP.INCREMENTAL and plan.train_dates == ("2026-11-02", "2026-11-03")


def test_the_lineage_is_retrained_in_full_every_nth_night():
    assert TP.decide(True, 3, WINDOW, 5, _card(models=1)).mode == TP.INCREMENTAL     # night 2 of 3
    plan = TP.decide(True, 3, WINDOW, 5, _card(models=2))                            # night 3
    assert plan.mode == TP.FULL and "train.full_retrain_every=3" in plan.reason
    assert TP.decide(True, 1, WINDOW, 5, _card()).mode == TP.FULL                    # every night


def test_a_model_that_cannot_be_continued_means_a_full_retrain():
    assert "records no training plan" in TP.decide(True, 7, WINDOW, 5, {"run_date": "2026-11-03"}).reason
    assert "records no training plan" in TP.decide(True, 7, WINDOW, 5, None).reason
    assert "older than the window" in TP.decide(True, 7, WINDOW, 5, _card("2026-10-20")).reason
    # A backfill: the served model already saw this whole window.
    assert "not older than this window" in TP.decide(True, 7, WINDOW, 5, _card("2026-11-09")).reason


def test_the_plan_survives_the_manifest_and_an_old_manifest_means_full():
    plan = TP.decide(True, 7, WINDOW, 5, _card())
    assert TP.Plan.from_json(json.loads(json.dumps(plan.to_json())), WINDOW) == plan
    old = TP.Plan.from_json(None, WINDOW)
    assert old.mode == TP.FULL and old.train_dates == tuple(d.isoformat() for d in WINDOW)


def test_a_plan_and_a_card_from_before_the_rename_keep_their_count():
    """2ac0a8e wrote `nights_since_full`: a run preprocessed, or a model trained, by it and read
    by this code keeps its place in the lineage (it raised KeyError in train)."""
    recorded = {**TP.decide(True, 7, WINDOW, 5, _card(models=2)).to_json()}
    recorded["nights_since_full"] = recorded.pop("models_since_full")
    assert TP.Plan.from_json(recorded, WINDOW).models_since_full == 3
    card = {"run_date": "2026-11-03", "training": {"mode": "incremental", "nights_since_full": 2}}
    assert TP.decide(True, 3, WINDOW, 5, card).mode == TP.FULL            # 2 + 1 reaches full_retrain_every


def test_the_plan_reads_the_served_versions_card_from_the_serving_dir(tmp_path):
    base = tmp_path / "recommender"
    assert TP.served_card(base) == (None, None)
    (base / "4").mkdir(parents=True)
    (base / "4" / "saved_model.pb").write_bytes(b"")
    assert TP.served_card(base) == (4, None)                       # no card: cannot be continued
    (base / "4" / serving.MODEL_CARD).write_text(json.dumps(_card()))
    assert TP.served_card(base) == (4, _card())


def test_an_incremental_night_fine_tunes_with_its_own_epochs_and_learning_rate(tiny_config):
    config = tiny_config.with_overrides({"train.epochs": 4, "train.learning_rate": 0.001,
                                         "train.incremental_epochs": 2, "train.incremental_learning_rate": 0.0002})
    assert TP.night_config(config, TP.full(WINDOW, "off")) is config
    tonight = TP.night_config(config, TP.decide(True, 7, WINDOW, 5, _card()))
    assert (tonight.train.epochs, tonight.train.learning_rate) == (2, 0.0002)
