"""`run(config, paths)`: run the Beam pipeline into temp dirs, check rejects, publish atomically.

Everything is written under hidden temp siblings; only after the rejected-fraction check
passes is the (examples, transform) pair replaced (`pipeline.contracts.manifest.publish`). A
killed publish is undone by `manifest.recover` at the next run's start, so the last good
output is never lost.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path

from components.preprocess.report import row_report
from pipeline.config import Config
from pipeline.contracts import event_ids, training_plan
from pipeline.contracts import item_table as IT
from pipeline.contracts import manifest as M
from pipeline.contracts.inputs import ValidationError, check_inputs
from pipeline.fsutil import (
    disk_full_named,
    publish_dir,
    remove_stale_temps,
    require_free,
    sha256_file,
    temp_sibling,
    write_json_atomic,
)
from pipeline.paths import RunPaths
from pipeline.results import PreprocessResult

log = logging.getLogger(__name__)
FN_API_RUNNER = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
DIRECT_NAMES = {"directrunner", "direct", FN_API_RUNNER.lower()}
# "auto" running mode: in_memory unless the day is big and there are cores to spare, because
# every worker process first imports TensorFlow and all data crosses gRPC (figures in
# docs/benchmarks.md). Parallel workers pay that back only with more cores and more data.
AUTO_IN_MEMORY_MAX_EVENTS = 1_000_000
AUTO_MULTI_MIN_CORES = 4


# A lower bound of what one raw event costs on the artifact volume (its example alone is larger,
# docs/benchmarks.md): the check before Beam starts refuses a volume that cannot possibly hold
# the output; a volume that fills later is named by disk_full_named.
MIN_EXAMPLE_BYTES = 256


def running_mode(config: Config, events: int | None) -> str:
    mode = config.preprocess.direct_running_mode
    if mode != "auto":
        return mode
    cores = config.preprocess.direct_num_workers or os.cpu_count() or 1
    big = events is None or events > AUTO_IN_MEMORY_MAX_EVENTS
    return "multi_processing" if big and cores >= AUTO_MULTI_MIN_CORES else "in_memory"


def pipeline_options(config: Config, beam_args: list[str] | tuple[str, ...] = (), events: int | None = None):
    """PipelineOptions from config + pass-through flags (flags win).

    "DirectRunner" is mapped to the FnApiRunner class it delegates to for batch pipelines:
    Beam 2.77's DirectRunner would first try to download and start the Prism runner binary.
    """
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

    pre = config.preprocess
    options = PipelineOptions([f"--runner={pre.runner}", *pre.beam_args, *beam_args])
    standard = options.view_as(StandardOptions)
    if (standard.runner or "").lower() in DIRECT_NAMES:
        standard.runner = FN_API_RUNNER
        direct = options.view_as(DirectOptions)
        flags = " ".join([*pre.beam_args, *beam_args])
        if "--direct_running_mode" not in flags:
            direct.direct_running_mode = running_mode(config, events)
        if "--direct_num_workers" not in flags:
            direct.direct_num_workers = pre.direct_num_workers or os.cpu_count() or 1
        if direct.direct_running_mode == "in_memory":
            direct.direct_num_workers = 1
    return options


def spills_shuffle(options) -> bool:
    """The DirectRunner (its FnApiRunner) keeps a GroupByKey's input in memory: spill instead."""
    from apache_beam.options.pipeline_options import StandardOptions

    return (options.view_as(StandardOptions).runner or "").lower() in DIRECT_NAMES


# The Job API's runners (PortableRunner and its Flink/Spark subclasses), and the experiment
# (`--experiments=skip_worker_pool_check`) that turns the worker-pool check off.
PORTABLE_RUNNERS = ("portablerunner", "flinkrunner", "sparkrunner")
SKIP_POOL_CHECK = "skip_worker_pool_check"
# A worker the pool starts imports apache_beam's SDK harness and calls back: ~1.5 s here.
WORKER_POOL_CHECK_S = 20.0


class WorkerPoolError(RuntimeError):
    """The EXTERNAL environment's worker pool cannot start an SDK worker that reaches the runner."""


def _loopback(address: str) -> bool:
    host = address.rpartition("://")[2].rsplit(":", 1)[0].strip("[]").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def _external_pool(options) -> str | None:
    """The worker pool's address when the job runs on this host in an EXTERNAL environment at a
    loopback address: only then does this process see the pool the job service will ask. (On a
    cluster, `localhost:50000` is each node's own pool sidecar, resolved there.)"""
    from apache_beam.options.pipeline_options import DebugOptions, PortableOptions

    opts = options.get_all_options()
    portable = options.view_as(PortableOptions)
    runner = (opts.get("runner") or "").lower().rsplit(".", 1)[-1]
    if (portable.environment_type or "").upper() != "EXTERNAL" or runner not in PORTABLE_RUNNERS \
            or options.view_as(DebugOptions).lookup_experiment(SKIP_POOL_CHECK):
        return None
    config = portable.environment_config or ""
    pool = (json.loads(config).get("url") if config.lstrip().startswith("{") else config) \
        or portable.lookup_environment_option("external_service_address")
    masters = [opts.get("job_endpoint")]
    if runner == "flinkrunner" and opts.get("flink_master") not in ("[auto]", "[local]"):
        masters.append(opts.get("flink_master"))
    if runner == "sparkrunner" and not (opts.get("spark_master_url") or "local").startswith("local"):
        masters.append(opts.get("spark_master_url"))
    here = all(not m or m == "embed" or _loopback(m) for m in masters)
    return pool if pool and here and _loopback(pool) else None


def check_worker_pool(options, timeout_s: float = WORKER_POOL_CHECK_S) -> None:
    """Fail in seconds, naming the cause, when the EXTERNAL worker pool cannot start an SDK worker.

    The pool (apache_beam.runners.worker.worker_pool_main) starts each worker as
    `python -c "from apache_beam.runners.worker.sdk_worker import SdkHarness; ..."` with the first
    `python` on the pool's own PATH, and answers StartWorker as soon as that process is spawned. A
    python without apache_beam dies at once, in the pool's log only; the runner waits for a worker
    that never connects, and the client gives up when PortableOptions.job_server_timeout (300 s)
    ends the job's state stream with a bare DEADLINE_EXCEEDED. So before submitting: ask the pool
    for one worker whose control endpoint is a server of ours, wait for it to call, let it go.
    """
    pool = _external_pool(options)
    if not pool:
        return
    from concurrent import futures

    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc, endpoints_pb2

    called = threading.Event()

    def control(_responses, _context):            # the worker's control stream: end it at once
        called.set()
        return iter(())

    class Callback(grpc.GenericRpcHandler):
        def service(self, details):
            if details.method.endswith("/BeamFnControl/Control"):
                return grpc.stream_stream_rpc_method_handler(
                    control, request_deserializer=beam_fn_api_pb2.InstructionResponse.FromString,
                    response_serializer=beam_fn_api_pb2.InstructionRequest.SerializeToString)
            called.set()      # any other Fn API call (a container executable's boot asks for its
                              # provision info first): a worker process is talking to us
            return None

    server = grpc.server(futures.ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers((Callback(),))
    endpoint = endpoints_pb2.ApiServiceDescriptor(url=f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}")
    server.start()
    worker_id = f"reco-pool-check-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    try:
        with grpc.insecure_channel(pool) as channel:
            stub = beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(channel)
            try:
                response = stub.StartWorker(beam_fn_api_pb2.StartWorkerRequest(
                    worker_id=worker_id, control_endpoint=endpoint, logging_endpoint=endpoint,
                    artifact_endpoint=endpoint, provision_endpoint=endpoint), timeout=timeout_s)
            except grpc.RpcError as err:
                raise WorkerPoolError(f"no Beam worker pool answers at {pool} (--environment_config): "
                                      f"{err.code().name}: {err.details()}") from None
            if response.error:
                raise WorkerPoolError(f"the worker pool at {pool} cannot start an SDK worker: "
                                      f"{response.error.strip().splitlines()[-1]}")
            try:
                if not called.wait(timeout_s):
                    raise WorkerPoolError(
                        f"the worker pool at {pool} started an SDK worker, but none called back within "
                        f"{timeout_s:.0f} s: the pool runs each worker with the first `python` on the pool's own "
                        "PATH (`python -c 'from apache_beam.runners.worker.sdk_worker import SdkHarness; ...'`), and "
                        "that python cannot run Beam's SDK harness (most often it is not this environment's python "
                        "and lacks apache_beam: ModuleNotFoundError in the pool's log). Start the pool with this "
                        f"environment first on its PATH: PATH={Path(sys.executable).parent}:$PATH {sys.executable} "
                        "-m apache_beam.runners.worker.worker_pool_main --service_port PORT "
                        f"(--experiments={SKIP_POOL_CHECK} turns this check off)")
                log.info("worker pool %s started an SDK worker that called back in %.1f s", pool,
                         time.monotonic() - started)
            finally:                              # the pool forgets the worker (and reaps its process)
                try:
                    stub.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id=worker_id), timeout=15)
                except grpc.RpcError as err:
                    log.warning("worker pool %s: stopping the check's worker: %s", pool, err.code().name)
    finally:
        server.stop(0)


def _warn_job_deadline(options) -> None:
    """job_server_timeout is also the deadline of the job's whole state stream (measured: a 15 s
    job with --job_server_timeout=5 fails at 5 s with DEADLINE_EXCEEDED), not only of connecting."""
    from apache_beam.options.pipeline_options import PortableOptions

    runner = options.get_all_options().get("runner") or ""
    explicit = options.get_all_options(drop_default=True).get("job_server_timeout")
    if runner.lower().rsplit(".", 1)[-1] in PORTABLE_RUNNERS and explicit is None:
        log.warning("%s: a job that runs longer than --job_server_timeout (%d s) fails with DEADLINE_EXCEEDED; "
                    "set it in preprocess.beam_args above the run's duration (docs/preprocess.md)",
                    runner, options.view_as(PortableOptions).job_server_timeout)


def _shard_counts(config: Config) -> dict[str, int]:
    workers, pre = config.train.workers, config.preprocess
    return {"train": workers * pre.readers_per_worker * pre.shard_multiple,
            "eval": workers * pre.readers_per_worker}


def _temp_dirs(paths: RunPaths) -> dict[str, str]:
    paths.run_dir.mkdir(parents=True, exist_ok=True)
    M.recover(paths.examples_dir, paths.transform_dir)
    for final in (paths.examples_dir, paths.transform_dir):
        for stale in remove_stale_temps(final.parent, final.name):
            log.info("removed leftover of an earlier killed run: %s", stale)
    examples = temp_sibling(paths.examples_dir)
    transform = temp_sibling(paths.transform_dir)
    return {"examples": str(examples), "transform": str(transform),
            "tft_tmp": str(examples / "_tft_tmp"), "rejected": str(examples / "_rejected"),
            "spill": str(examples / "_spill")}


def _complete_shards(out_dir: Path, stats: list[dict], shards: dict[str, int]) -> list[dict]:
    """Add empty (valid, 0-example) files for shards no example hashed to."""
    have = {(s["split"], s["shard"]) for s in stats}
    for split, total in shards.items():
        for shard in range(total):
            if (split, shard) not in have:
                name = M.shard_name(split, shard, total)
                (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
                (out_dir / name).write_bytes(b"")
                stats.append({"name": name, "split": split, "shard": shard, "examples": 0, "bytes": 0,
                              "sha256": sha256_file(out_dir / name)})
    return stats


def _item_table_record(out_dir: Path) -> dict:
    """The manifest's entry for the item table the pipeline wrote (its rows from the footer)."""
    import pyarrow.parquet as pq

    path = out_dir / IT.ITEM_TABLE
    return IT.record(pq.ParquetFile(path).metadata.num_rows, path.stat().st_size, sha256_file(path))


def _publish_rejected(paths: RunPaths, out: dict[str, str]) -> None:
    src = Path(out["rejected"])
    if src.exists():
        tmp = temp_sibling(paths.validation_dir / "rejected")
        shutil.move(str(src), tmp)
        publish_dir(tmp, paths.validation_dir / "rejected")


def _discard(out: dict[str, str]) -> None:
    for key in ("examples", "transform"):
        shutil.rmtree(out[key], ignore_errors=True)


def run(config: Config, paths: RunPaths, beam_args: list[str] | tuple[str, ...] = ()) -> PreprocessResult:
    """Preprocess the run's window into transformed shards; raise ValidationError on bad input."""
    import apache_beam as beam

    from components.preprocess.pipeline import STATS_DIR, build

    inputs = check_inputs(paths)
    events = inputs.event_rows
    shards = _shard_counts(config)
    out = _temp_dirs(paths)
    started = time.monotonic()
    try:
        options = pipeline_options(config, beam_args, events)
        log.info("preprocess %s: %d events over %d train days + eval day, %d items, shards %s, options %s",
                 paths.ds, events, len(inputs.train), inputs.item_rows, shards,
                 {k: v for k, v in options.get_all_options(drop_default=True).items() if k != "beam_args"})
        repeats = {f: rows for day, files in inputs.event_files.items()
                   for f, rows in event_ids.read_partition(day, files).repeats.items() if len(rows)}
        what = f"writing the examples and transform of run {paths.run_id}"
        require_free(paths.run_dir, events * MIN_EXAMPLE_BYTES, what)
        _warn_job_deadline(options)
        check_worker_pool(options)
        plan = training_plan.plan_for(config.train, paths.model_base, paths.train_dates)
        with disk_full_named(paths.run_dir, what), beam.Pipeline(options=options) as p:
            build(p, config, inputs, out, shards, repeats, spill=spills_shuffle(options),
                  transformed=inputs.with_train_days(plan.train_dates))
        examples_tmp = Path(out["examples"])
        counts = json.loads((examples_tmp / STATS_DIR / "counts.json").read_text())
        stats = json.loads((examples_tmp / STATS_DIR / "shards.json").read_text())
        report = row_report(counts, config.preprocess.max_rejected_fraction)
        report_path = paths.validation_dir / "rows.json"
        write_json_atomic(report_path, report)
        _publish_rejected(paths, out)
        if report["problems"]:
            raise ValidationError(report["problems"])
        stats = _complete_shards(examples_tmp, stats, shards)
        for scratch in (STATS_DIR, "_tft_tmp", "_rejected", "_spill"):
            shutil.rmtree(examples_tmp / scratch, ignore_errors=True)
        manifest = M.build(paths, stats, config.train.workers, config.preprocess.compression, config.model,
                           M.transform_fingerprint(Path(out["transform"])),
                           extra={"rejected": report["rejected"],
                                  "item_table": _item_table_record(examples_tmp),
                                  "training_plan": plan.to_json()})
        write_json_atomic(examples_tmp / M.MANIFEST, manifest)
        M.publish(examples_tmp, Path(out["transform"]), paths.examples_dir, paths.transform_dir)
    except BaseException:
        _discard(out)
        raise
    log.info("preprocess %s done in %.1fs: %d train / %d eval examples", paths.ds,
             time.monotonic() - started, manifest["splits"]["train"]["examples"],
             manifest["splits"]["eval"]["examples"])
    return PreprocessResult(
        run_date=paths.ds,
        examples_dir=str(paths.examples_dir),
        transform_dir=str(paths.transform_dir),
        manifest_path=str(paths.examples_dir / M.MANIFEST),
        report_path=str(report_path),
        train_examples=manifest["splits"]["train"]["examples"],
        eval_examples=manifest["splits"]["eval"]["examples"],
        rejected=sum(report["rejected"]["events"].values()),
        num_shards=manifest["splits"]["train"]["num_shards"] + manifest["splits"]["eval"]["num_shards"],
    )
