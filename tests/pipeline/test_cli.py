import argparse
import json
import subprocess
import sys

from pipeline.cli import add_run_arguments, emit_result, load_run
from pipeline.results import StageResult


def parse(argv):
    return add_run_arguments(argparse.ArgumentParser()).parse_args(argv)


def test_overrides_layer_json_then_set(tmp_path):
    args = parse(["--date", "2026-11-08", "--run-id", "manual__x:1", "--overrides-json", '{"train.workers": 3}',
                  "--set", "train.epochs=4", "--set", "eval.min_auc=null"])
    config, paths = load_run(args)
    assert config.train.workers == 3 and config.train.epochs == 4 and config.eval.min_auc is None
    assert paths.ds == "2026-11-08" and paths.run_id == "manual__x_1"


def test_result_json_is_written_for_the_pod_xcom_sidecar(tmp_path, capsys):
    args = parse(["--date", "2026-11-08", "--result-json", str(tmp_path / "xcom" / "return.json")])
    emit_result(StageResult("/ssd", 4, 1024), args)
    written = json.loads((tmp_path / "xcom" / "return.json").read_text())
    assert written == json.loads(capsys.readouterr().out) and written["num_shards"] == 4


def test_validate_cli_fails_with_exit_2_listing_missing_dates(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(f"data:\n  raw_root: {tmp_path}/raw\n  artifact_root: {tmp_path}/art\n")
    done = subprocess.run([sys.executable, "-m", "components.validate", "--config", str(params),
                           "--date", "2026-11-08"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "missing dates: 2026-11-05, 2026-11-06, 2026-11-07, 2026-11-08" in done.stderr


def test_a_set_without_equals_is_refused_naming_it():
    import pytest

    with pytest.raises(SystemExit, match="--set expects KEY=VALUE, got 'eval.min_auc'"):
        load_run(parse(["--date", "2026-11-08", "--set", "eval.min_auc"]))


def test_every_step_cli_takes_the_shared_run_arguments():
    """One argument contract for all steps: the DAG's pod operator and on-call use the same flags."""
    for step in ("validate", "preprocess", "stage", "train", "evaluate"):
        done = subprocess.run([sys.executable, "-m", f"components.{step}", "--help"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        for flag in ("--date", "--run-id", "--config", "--overrides-json", "--set", "--result-json"):
            assert flag in done.stdout, (step, flag)
    done = subprocess.run([sys.executable, "-m", "components.push", "rollback", "--help"],
                          capture_output=True, text=True)
    assert "--overrides-json" in done.stdout and "--date" not in done.stdout


def test_set_reads_numbers_as_numbers():
    from pipeline.cli import parse_sets

    got = parse_sets(["model.bias_l2=1e-4", "train.workers=3", "eval.max_auc_drop=null", "a=abc", "b=true"])
    assert got == {"model.bias_l2": 1e-4, "train.workers": 3, "eval.max_auc_drop": None, "a": "abc", "b": True}


def test_exit_zero_is_offered_only_by_the_steps_that_have_a_verdict():
    """`--exit-zero` turns a verdict (NOT_BLESSED, a skipped push) into exit 0; a step without
    one refuses the flag instead of ignoring it."""
    helps = {step: subprocess.run([sys.executable, "-m", f"components.{step}", *sub, "--help"],
                                  capture_output=True, text=True).stdout
             for step, sub in (("validate", ()), ("stage", ()), ("evaluate", ()), ("push", ("push",)))}
    assert {step for step, text in helps.items() if "--exit-zero" in text} == {"evaluate", "push"}


def test_a_step_cli_mirrors_to_the_artifact_store_like_a_dag_task(tmp_path):
    """A pod runs the step's CLI, not the DAG's wrapper: with data.artifact_store set it still
    publishes what it wrote (memory:// lives in this process, so the CLI runs in process)."""
    import uuid

    from components.validate.__main__ import main
    from pipeline import storage
    from tests.components.preprocess.helpers import RUN_DATE, generate_raw
    from tests.conftest import make_tiny_config, tiny_overrides

    store = f"memory://reco-cli-{uuid.uuid4().hex[:8]}"
    generate_raw(make_tiny_config(tmp_path))
    sets = [f"{k}={v if isinstance(v, str) else json.dumps(v)}"     # YAML values: None is null
            for k, v in {**tiny_overrides(tmp_path), "data.artifact_store": store}.items()]
    argv = ["--date", RUN_DATE.isoformat(), "--run-id", "pod", *[a for s in sets for a in ("--set", s)]]
    assert main(argv) == 0
    listing = storage.listing(f"{store}/runs/{RUN_DATE.isoformat()}/pod/validation") or {}
    assert "report.json" in listing


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_run_id_or_date_that_is_not_exact_is_refused_by_the_cli_touching_nothing(tmp_path):
    """`--run-id .` made stage's staged dir the date folder and replaced every staged run of the
    date; `--date 2026-11-05xyz` ran as 11-05. Both are refused before anything is read."""
    import pytest

    params = tmp_path / "params.yaml"
    params.write_text(f"data:\n  raw_root: {tmp_path}/raw\n  artifact_root: {tmp_path}/art\n"
                      f"  staging_root: {tmp_path}/ssd\n")
    sibling = tmp_path / "ssd" / "2026-11-05" / "scheduled__x"
    sibling.mkdir(parents=True)
    (sibling / "manifest.json").write_text("{}")
    before = _tree(tmp_path)
    for flag, value, message in [("--run-id", ".", "starts with '.'"), ("--run-id", "..", "starts with '.'"),
                                 ("--run-id", "a/b", "path separator"), ("--date", "2026-11-05xyz", "YYYY-MM-DD"),
                                 ("--date", "2026-11-051", "YYYY-MM-DD")]:
        argv = {"--date": "2026-11-05", "--run-id": "cli", flag: value}
        done = subprocess.run([sys.executable, "-m", "components.stage", "--config", str(params),
                               *[x for kv in argv.items() for x in kv]], capture_output=True, text=True)
        assert done.returncode == 2, (flag, value, done.stderr[-300:])
        assert message in done.stderr, (flag, value, done.stderr[-300:])
        assert "Traceback" not in done.stderr
    assert _tree(tmp_path) == before
    with pytest.raises(SystemExit):
        parse(["--date", "2026-11-05", "--run-id", "."])
