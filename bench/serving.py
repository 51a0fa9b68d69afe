"""Batch-1 serving latency of the model on raw features, its size, and the TF Lite figures.

    python -m bench serving     (or: python -m bench.serving [--architecture A | --served | --model-dir DIR]
                                 [--processes N])

Which model: by default a model of `--architecture` (din, the default, or reference) at the
reference dimensions (embedding 128, 50k title words, 100k items, 10k users) exported by the
training stage's real export, with the real tf.Transform graph made by the real preprocess
stage on a small generated data set. Weights are untrained: latency and size do not depend on
their values. `--served` measures the version served under the default config's serving base
(what `make demo` pushed) instead, `--model-dir` any export; neither is the default, so what is
measured never depends on what a previous run left in var/; their figures go to
serving_served.json and serving_model_dir.json, never over serving.json.

Latency: in-process, CPU, one request of one impression at a time through the loaded
SavedModel's `serving_default` signature (title string, 2048 floats, a 20-item history),
after warm-up; p50/p99 over many calls, in each of `--processes` fresh processes, and the
figures are the medians over those processes: on these VMs a process's latency depends on
where its threads land more than on the model, so one process is one sample. The first call
(XLA compile, when the export is compiled) is reported apart as `first_call_s`. Reference
measured in the same processes (built models only): the same weights exported the other way
(`model.serving_xla` flipped: plain for the reference architecture, with unrolled LSTMs;
XLA-compiled for din), timed in alternating rounds with the export (`alt_over_export_p50`).
The by-id signature (item id, history, user, context: the shown item's vector from the exported
item table) is timed in the same rounds on the same request (`by_id_p50_ms`, `by_id_p99_ms`).
Fixed reference: 5 ms at the edge; goals p50 < 2 ms, p99 < 5 ms raw, p50 <= 1 ms, p99 <= 2 ms by id.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import write_result
from pipeline.cli import parse_sets
from pipeline.config import PROJECT_ROOT, load_config
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT
from pipeline.contracts.signature import SERVING_BY_ID, SERVING_DEFAULT

log = logging.getLogger("bench.serving")
RUNS = 1000
REFERENCE_EDGE_MS, GOAL_P50_MS, GOAL_P99_MS = 5.0, 2.0, 5.0
GOAL_BY_ID_P50_MS, GOAL_BY_ID_P99_MS = 1.0, 2.0


def served_model(config) -> Path | None:
    from pipeline.contracts import serving

    base = config.data.serving_base / config.push.model_name
    version = serving.served_version(base)
    return serving.version_dir(base, version) if version is not None else None


def build_reference_model(workdir: Path, config) -> tuple[Path, Path]:
    """Real preprocess (tf.Transform graph) + real architecture + real export, untrained.

    Exported twice with the same weights: as configured, and with `model.serving_xla` flipped
    (what that setting really builds: unrolled LSTMs when plain), the reference measured in the
    same run.
    """
    from components import preprocess
    from components.train.model.build import VocabSizes, build_model
    from components.train.worker.export import export_saved_model
    from pipeline.datagen import generate
    from pipeline.paths import RunPaths

    day = dt.date(2026, 11, 4)
    generate(config.data.raw_root, day - dt.timedelta(days=3), 4, users=300, items=200,
             events_per_day=1500, seed=7)
    paths = RunPaths.for_run(config, day, "bench")
    preprocess.run(config, paths)
    vocab = VocabSizes.from_config(config.model)
    model = build_model(config.model, vocab)
    alt_cfg = dataclasses.replace(config.model, serving_xla=not config.model.xla_export)
    alt = build_model(alt_cfg, vocab)
    alt.set_weights(model.get_weights())
    table = paths.examples_dir / IT.ITEM_TABLE
    return (export_saved_model(model, table, paths.transform_dir, workdir / "model", config.model),
            export_saved_model(alt, table, paths.transform_dir, workdir / "model_alt", alt_cfg))


def example_request() -> dict:
    """One impression shaped like the generated data: a 5-word title, a sparse non-negative
    image embedding, a 20-item history (the generator's mean length) and its context."""
    rng = np.random.default_rng(0)
    return {F.TITLE: "Navy leather slim jacket #42",
            F.IMAGE: np.maximum(rng.normal(0, 1, F.IMAGE_DIM), 0).astype(np.float32).tolist(),
            F.HISTORY: rng.integers(1, 200, size=20).tolist(), F.ITEM_ID: 17, F.USER_ID: 1234,
            F.PLATFORM: "ios", F.HOUR: 20}


def interleaved_latency(calls: dict, rounds: int = 5, warmup: int = 50) -> dict[str, dict[str, float]]:
    """Latency of each call in ms, measured in alternating rounds so that drifting machine load
    hits all of them alike; p50/p99 over the pooled rounds (RUNS calls each)."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            for _ in range(RUNS // rounds):
                start = time.perf_counter()
                call()
                times[name].append((time.perf_counter() - start) * 1000)
    from components.push.tflite import summary_ms

    return {name: summary_ms(t) for name, t in times.items()}


def measure_latency(model_dir: Path, example: dict, alt_dir: Path | None = None) -> dict:
    """One process's figures: first call, then p50/p99 of the export (and the alternative)."""
    import tensorflow as tf

    from components.push import tflite

    inputs = {k: tf.constant(v) for k, v in tflite.batch1_inputs(example, model_dir).items()}
    loaded = tf.saved_model.load(str(model_dir))
    fn = loaded.signatures[SERVING_DEFAULT]
    start = time.perf_counter()
    fn(**inputs)                     # what TF Serving's warmup pays at load (XLA compiles here)
    first_call_s = time.perf_counter() - start
    calls = {"export": lambda: fn(**inputs)}
    if SERVING_BY_ID in loaded.signatures:
        by_id = loaded.signatures[SERVING_BY_ID]
        by_id_inputs = {k: v for k, v in inputs.items() if k in by_id.structured_input_signature[1]}
        calls["by_id"] = lambda: by_id(**by_id_inputs)
    if alt_dir is not None:
        alt = tf.saved_model.load(str(alt_dir)).signatures[SERVING_DEFAULT]
        calls["alt"] = lambda: alt(**inputs)
    lat = interleaved_latency(calls)
    return {"first_call_s": first_call_s, **{f"{name}_{key}": value for name, figures in lat.items()
                                             for key, value in figures.items()}}


def measure_in_processes(model_dir: Path, alt_dir: Path | None, processes: int) -> dict:
    """Medians over `processes` fresh processes of each one's p50/p99, and each one's figures."""
    runs = []
    for i in range(processes):
        command = [sys.executable, "-m", "bench.serving", "--measure", str(model_dir)]
        command += ["--alternative", str(alt_dir)] if alt_dir is not None else []
        # stdout carries the figures; the child's log and any traceback go to this stderr
        out = subprocess.run(command, check=True, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        log.info("process %d of %d: %s", i + 1, processes, runs[-1])
    figures: dict = {"processes": processes, "calls_per_process": runs[0]["export_runs"],
                     "first_call_s": statistics.median(r["first_call_s"] for r in runs)}
    prefixes = {"export": ""} | ({"alt": "alt_"} if alt_dir is not None else {})
    prefixes |= {"by_id": "by_id_"} if "by_id_p50_ms" in runs[0] else {}
    for name, prefix in prefixes.items():
        for stat in ("p50_ms", "p99_ms"):
            values = [r[f"{name}_{stat}"] for r in runs]
            figures[f"{prefix}{stat}"] = statistics.median(values)
            figures[f"{prefix}{stat}_per_process"] = [round(v, 3) for v in values]
    if alt_dir is not None:
        figures["alt_over_export_p50"] = figures["alt_p50_ms"] / figures["p50_ms"]
    return figures


def tflite_figures(model_dir: Path, example: dict) -> dict:
    """Size and batch-1 latency of the TF Lite core beside the SavedModel's (components/push/tflite.py)."""
    from components.push import tflite

    figures: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-tflite-") as tmp:
        report = tflite.convert_and_measure(model_dir, Path(tmp) / "model.tflite", [example],
                                            runs=RUNS, time_savedmodel=False)
    raw_sig, core = report["raw_signature"], report.get("core", {})
    figures["tflite_raw_signature"] = (
        f"converts only with {raw_sig.get('mode')}; " + ("runs" if "tflite" in raw_sig else "needs the Flex "
                                                         "delegate (not in the TF pip interpreter)")
        if raw_sig["converted"] else "does not convert")
    if core.get("tflite_mib"):
        figures.update(tflite_mib=core["tflite_mib"], tflite_p50_ms=core["tflite"]["p50_ms"],
                       tflite_p99_ms=core["tflite"]["p99_ms"],
                       savedmodel_core_p50_ms=core["savedmodel_core"]["p50_ms"],
                       tflite_max_abs_diff=core["max_abs_diff_vs_savedmodel"],
                       tflite_scope="core model on transformed ids, batch 1, builtin ops")
    else:
        figures["tflite_core_error"] = str(core.get("errors"))[:300]
    return figures


def reference_config(work: Path, architecture: str = "din", extra: tuple[str, ...] = ()):
    """`extra`: KEY=VALUE overrides (`--set`), e.g. model.user_memory_weight=0 to time a variant."""
    return load_config(env={}, overrides={
        "data.raw_root": str(work / "raw"), "data.artifact_root": str(work / "artifacts"),
        "data.staging_root": str(work / "ssd"), "data.serving_base": str(work / "serving"),
        "preprocess.direct_num_workers": 1, "model.architecture": architecture,
        **parse_sets(list(extra))})


def build_in_child(work: Path, architecture: str, extra: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Build the reference-size exports in a child process: a process that ran a Beam pipeline
    keeps its threads (and crashes at exit, see tests/conftest.py), which skews tail latency."""
    subprocess.run([sys.executable, "-m", "bench.serving", "--build-reference", str(work),
                    "--architecture", architecture, *(f"--set={item}" for item in extra)],
                   check=True, cwd=PROJECT_ROOT)
    return work / "model", work / "model_alt"


def child(args) -> None:
    """The `--build-reference` and `--measure` children: never the interpreter's own exit after Beam."""
    status = 0
    try:
        if args.build_reference:
            build_reference_model(args.build_reference, reference_config(
                args.build_reference, args.architecture, tuple(args.set)))
        else:
            figures = measure_latency(args.measure, example_request(), args.alternative)
            sys.stdout.write(json.dumps(figures) + "\n")
            sys.stdout.flush()
    except Exception:  # noqa: BLE001 - reported here, then the child exits 1
        log.exception("benchmark child failed")
        status = 1
    logging.shutdown()
    os._exit(status)


def _at_least_one(text: str) -> int:
    if int(text) < 1:
        raise argparse.ArgumentTypeError(f"got {text}, expected an int >= 1")
    return int(text)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.serving")
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--build-reference", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--alternative", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--architecture", default="din", choices=("din", "reference"))
    parser.add_argument("--served", action="store_true", help="the version served under the config's serving base")
    parser.add_argument("--processes", type=_at_least_one, default=3,
                        help="fresh processes measured (figures: medians)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override of the built model (result: serving_variant.json)")
    args = parser.parse_args(argv or [])
    if args.build_reference or args.measure:
        child(args)
    config = load_config()
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        model_dir, alt_dir, source = args.model_dir and args.model_dir.resolve(), None, "--model-dir"
        if args.served:
            if (model_dir := served_model(config)) is None:
                raise SystemExit(f"no served version under {config.data.serving_base}")
            source = "served version"
        if model_dir is None:
            config = reference_config(Path(tmp), args.architecture, tuple(args.set))
            (model_dir, alt_dir) = build_in_child(Path(tmp), args.architecture, tuple(args.set))
            source = f"{args.architecture} architecture at reference sizes, untrained {' '.join(args.set)}".strip()
        log.info("benchmarking %s (%s)", model_dir, source)
        from components.push.tflite import dir_mib
        from components.train.worker.saved_model_facts import xla_compiled_functions

        figures = {"model": source, "xla_compiled": bool(xla_compiled_functions(model_dir)),
                   "saved_model_mib": dir_mib(model_dir),
                   **measure_in_processes(model_dir, alt_dir, args.processes)}
        if alt_dir is not None:
            figures["alt_export"] = "plain" if figures["xla_compiled"] else "XLA-compiled"
        figures["load_avg_1m"] = os.getloadavg()[0]        # other processes on the cores skew p99
        figures |= tflite_figures(model_dir, example_request())
    figures["p50_over_edge_reference"] = figures["p50_ms"] / REFERENCE_EDGE_MS
    figures.update(reference_edge_ms=REFERENCE_EDGE_MS, goal_p50_ms=GOAL_P50_MS, goal_p99_ms=GOAL_P99_MS,
                   meets_goal=figures["p50_ms"] < GOAL_P50_MS and figures["p99_ms"] < GOAL_P99_MS)
    if "by_id_p50_ms" in figures:
        figures.update(goal_by_id_p50_ms=GOAL_BY_ID_P50_MS, goal_by_id_p99_ms=GOAL_BY_ID_P99_MS,
                       by_id_over_raw_p50=figures["by_id_p50_ms"] / figures["p50_ms"],
                       meets_by_id_goal=figures["by_id_p50_ms"] <= GOAL_BY_ID_P50_MS
                       and figures["by_id_p99_ms"] <= GOAL_BY_ID_P99_MS)
    write_result(_result_name(args), figures)
    return figures


def _result_name(args) -> str:
    """A served or given model, or a variant, never overwrites the reference-size figures."""
    if args.served:
        return "serving_served"
    if args.model_dir:
        return "serving_model_dir"
    if args.set:
        return "serving_variant"
    return "serving" if args.architecture == "din" else f"serving_{args.architecture}"


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main(sys.argv[1:])
