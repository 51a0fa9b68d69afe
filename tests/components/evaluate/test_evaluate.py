"""The gate end to end: real SavedModels scored through their raw serving signatures."""
from __future__ import annotations

import json

import pytest
import yaml

from components.evaluate import BLESSED, NOT_BLESSED, run
from components.evaluate.__main__ import NOT_BLESSED_EXIT, main
from tests.components.evaluate.fixtures import CLEAN_DAY, MALFORMED_DAY


def _metrics(paths):
    return json.loads((paths.eval_dir / "metrics.json").read_text())


def test_first_model_blessed_on_absolute_thresholds_and_malformed_rows_skipped(runs):
    config, paths = runs.make(MALFORMED_DAY, **{"eval.min_slice_size": 150})
    result = run(config, paths)
    assert result.blessed and result.baseline_version is None and result.baseline_auc is None
    m = _metrics(paths)
    # Every malformed kind the generator planted is skipped and counted, none is scored.
    assert m["rejected"] and sum(m["rejected"].values()) == m["rows_read"] - result.examples
    assert {"unknown_item", "null_label"} <= set(m["rejected"])
    assert m["history_truncated"] > 0        # long histories are cut to the most recent, not dropped
    assert m["baseline"] is None and m["deltas"] == {}
    assert any("no baseline" in n for n in m["verdict"]["notes"])
    assert m["bootstrap"]["candidate_auc"]["low"] < result.candidate_auc < m["bootstrap"]["candidate_auc"]["high"]
    marker = (paths.eval_dir / BLESSED).read_text()
    assert marker.startswith("BLESSED\n") and "eval.min_auc" in marker and "no baseline" in marker
    assert not (paths.eval_dir / NOT_BLESSED).exists()
    page = (paths.eval_dir / "report.html").read_text()
    assert "no model is served yet" in page and "roc.png" in page and "calibration.png" in page
    for png in ("roc.png", "calibration.png"):
        assert (paths.eval_dir / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    scored = [r for r in m["slices"] if "skipped" not in r]
    assert {r["slice"] for r in scored} == {"category", "platform"}
    assert all(r["count"] >= 150 and r["candidate"]["count"] == r["count"] for r in scored)
    small = [r for r in m["slices"] if "skipped" in r]
    assert small and all(r["count"] < 150 and "candidate" not in r for r in small)
    assert sum(r["count"] for r in m["slices"] if r["slice"] == "platform") == result.examples
    sample = json.loads((paths.eval_dir / "eval_sample.json").read_text())["examples"]
    assert len(sample) >= config.push.warmup_requests
    assert len(sample[0]["image_embedding"]) == 2048 and 0 < sample[0]["candidate_probability"] < 1


def test_bad_candidate_against_the_served_model_is_not_blessed(runs):
    config, paths = runs.make(CLEAN_DAY, model="bad")
    runs.serve_by_hand(config, 1, "bad")
    runs.serve_by_hand(config, 3, "good")               # the highest version is what TF Serving serves
    (config.data.serving_base / config.push.model_name / ".4.tmp-crashed").mkdir()   # ignored
    (config.data.serving_base / config.push.model_name / "notes.txt").write_text("x")
    result = run(config, paths)
    assert not result.blessed and result.baseline_version == 3
    m = _metrics(paths)
    assert m["baseline"]["auc"] > 0.6 > m["candidate"]["auc"]
    assert m["bootstrap"]["auc_diff"]["high"] < 0            # the whole interval says "worse"
    assert any("eval.min_auc" in r for r in result.reasons)
    assert any("served version 3" in r and "max_auc_drop" in r for r in result.reasons)
    marker = (paths.eval_dir / NOT_BLESSED).read_text().splitlines()
    assert marker[0] == NOT_BLESSED and marker[1:3] == result.reasons
    assert "served version 3" in (paths.eval_dir / "report.html").read_text()


def test_same_model_as_served_is_blessed_with_zero_gap(runs):
    config, paths = runs.make(CLEAN_DAY)
    runs.serve_by_hand(config, 1, "good")
    result = run(config, paths)
    assert result.blessed and result.candidate_auc == result.baseline_auc
    assert _metrics(paths)["bootstrap"]["auc_diff"]["high"] == 0.0


def test_no_thresholds_refuses_to_bless(runs):
    config, paths = runs.make(CLEAN_DAY, **{"eval.min_auc": None, "eval.max_log_loss": None,
                                            "eval.max_auc_drop": None})
    result = run(config, paths)
    assert not result.blessed and "no thresholds configured" in result.reasons[0]
    assert (paths.eval_dir / NOT_BLESSED).exists() and not (paths.eval_dir / BLESSED).exists()


def test_cli_override_reruns_the_same_run_and_replaces_the_verdict(runs, tmp_path):
    config, paths = runs.make(CLEAN_DAY)
    config_file = tmp_path / "params.yaml"
    config_file.write_text(yaml.safe_dump(config.to_dict()))
    argv = ["--date", CLEAN_DAY.isoformat(), "--run-id", paths.run_id, "--config", str(config_file)]
    assert main(argv) == 0
    assert (paths.eval_dir / BLESSED).exists()
    assert main([*argv, "--set", "eval.min_auc=0.99"]) == NOT_BLESSED_EXIT
    assert (paths.eval_dir / NOT_BLESSED).exists() and not (paths.eval_dir / BLESSED).exists()
    assert _metrics(paths)["thresholds"]["min_auc"] == 0.99
    assert not [p for p in paths.eval_dir.parent.iterdir() if p.name.startswith(".")]
    # A pod (execution.backend: kubernetes) exits 0 on a verdict; the gate reads it from the result.
    result_json = tmp_path / "return.json"
    assert main([*argv, "--set", "eval.min_auc=0.99", "--exit-zero", "--result-json", str(result_json)]) == 0
    assert json.loads(result_json.read_text())["blessed"] is False


def test_missing_candidate_is_an_error(runs):
    config, paths = runs.make(CLEAN_DAY, model=None)
    from components.evaluate import EvalError

    with pytest.raises(EvalError, match="no candidate SavedModel"):
        run(config, paths)


def test_a_short_batch_is_padded_to_the_one_batch_shape_and_the_padding_dropped(standins):
    """An XLA export compiles per batch shape; padding must not change any row's prediction."""
    import numpy as np

    from components.evaluate.scoring import Scorer
    from pipeline.contracts import features as F

    rng = np.random.default_rng(3)
    rows = {F.TITLE: np.array(["red shoe", "blue hat", "green bag"], dtype=object),
            F.IMAGE: rng.random((3, F.IMAGE_DIM), dtype=np.float32),
            F.HISTORY: np.array([[5, 7, 0], [9, 0, 0], [11, 12, 13]], dtype=np.int64)}
    plain, padded = Scorer(standins["good"]), Scorer(standins["good"], batch_size=8)
    seen, signature = [], padded._fn
    padded._fn = lambda **tensors: seen.append(tensors[F.TITLE].shape[0]) or signature(**tensors)
    got = padded(rows)
    assert seen == [8] and got.shape == (3,)
    np.testing.assert_allclose(got, plain(rows), atol=1e-6)
    assert len(set(np.round(got, 6))) == 3      # distinct rows, not the repeated padding row


def test_evaluate_alone_applies_preprocess_rejected_fraction_bound(runs):
    """The CLI, a backfill or a rerun calls evaluate without preprocess: a day with 6 % malformed
    rows is refused by the same bound, naming the fraction and the reasons, not scored and BLESSED."""
    from pipeline.contracts.inputs import ValidationError

    config, paths = runs.make(MALFORMED_DAY, **{"preprocess.max_rejected_fraction": 0.01})
    with pytest.raises(ValidationError) as err:
        run(config, paths)
    (problem,) = err.value.problems
    assert problem.startswith("evaluate: eval split: ") and "above preprocess.max_rejected_fraction=1.00%" in problem
    assert "unknown_item=" in problem and not (paths.eval_dir / BLESSED).exists()


def test_the_report_shows_the_quality_trend_of_the_last_nights(runs):
    """Two nights in one artifact tree: the second night's metrics.json, report table and
    trend.png hold both, read from the first night's own records."""
    from tests.components.evaluate.fixtures import SHUFFLED_DAY

    config, first = runs.make(CLEAN_DAY, run_id="night1")
    run(config, first)
    config, second = runs.make(SHUFFLED_DAY, run_id="night2")
    result = run(config, second)
    nights = json.loads((second.eval_dir / "metrics.json").read_text())["trend"]
    assert [(n["run_date"], n["run_id"]) for n in nights] == [(CLEAN_DAY.isoformat(), "night1"),
                                                              (SHUFFLED_DAY.isoformat(), "night2")]
    assert nights[1]["candidate_auc"] == pytest.approx(result.candidate_auc) and nights[1]["blessed"] == result.blessed
    page = (second.eval_dir / "report.html").read_text()
    assert "The last 2 nights" in page and CLEAN_DAY.isoformat() in page and 'src="trend.png"' in page
    assert (second.eval_dir / "trend.png").stat().st_size > 0
