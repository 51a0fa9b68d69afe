"""No Docker engine here: check statically what can be checked, so the images and compose file line up."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.config import PROJECT_ROOT

DOCKER = PROJECT_ROOT / "docker"


def compose() -> dict:
    return yaml.safe_load((DOCKER / "docker-compose.yml").read_text())


def pinned(package: str) -> str:
    text = (PROJECT_ROOT / "constraints.txt").read_text()
    return re.search(rf"^{re.escape(package)}==(\S+)$", text, re.MULTILINE).group(1)


def dockerfile_instructions(name: str) -> list[tuple[str, str]]:
    lines = (DOCKER / name).read_text().replace("\\\n", " ").splitlines()
    return [tuple(line.split(maxsplit=1)) for line in lines if line.strip() and not line.startswith("#")]


def test_compose_services_and_ports():
    services = compose()["services"]
    assert {"postgres", "airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
            "tf-serving"} <= set(services)
    assert "8080:8080" in services["airflow-apiserver"]["ports"]
    assert {"8500:8500", "8501:8501"} <= set(services["tf-serving"]["ports"])
    assert services["airflow-scheduler"]["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")


def test_tf_serving_reads_the_models_config_that_push_writes_at_the_same_path():
    services = compose()["services"]
    serving_base = services["airflow-scheduler"]["environment"]["RECO__DATA__SERVING_BASE"]
    flags = _serving_flags()
    assert flags["model_config_file"] == f"{serving_base}/models.config"
    assert flags["rest_api_port"] == "8501" and flags["port"] == "8500"
    mounts = {m.split(":")[1]: m.split(":")[0] for m in services["tf-serving"]["volumes"]}
    airflow_mounts = {m.split(":")[1]: m.split(":")[0] for m in services["airflow-scheduler"]["volumes"]}
    assert serving_base in mounts and mounts[serving_base] == "../var/serving"
    # The Airflow side sees the same host folder at the same path.
    assert airflow_mounts["/opt/reco/var"] == "../var" and serving_base.startswith("/opt/reco/var/")


def test_tf_serving_can_run_the_xla_compiled_export():
    """The reference architecture's export is XLA-compiled by default; a server without the flag
    could not answer it (the default model's plain export needs nothing)."""
    from pipeline.config import load_config

    flags = _serving_flags()
    assert load_config(env={}, overrides={"model.architecture": "reference"}).model.xla_export
    assert flags["xla_cpu_compilation_enabled"] == "true" and flags["enable_model_warmup"] == "true"


def test_images_pin_the_constrained_versions():
    airflow_from = dict(dockerfile_instructions("airflow.Dockerfile"))["FROM"]
    worker_from = dict(dockerfile_instructions("worker.Dockerfile"))["FROM"]
    assert airflow_from == f"apache/airflow:{pinned('apache-airflow')}-python3.11"
    assert worker_from == f"tensorflow/tensorflow:{pinned('tensorflow')}-gpu"
    # TF Serving must load what the pinned TensorFlow exports (ops, SavedModel features): the
    # server is the same release. The client protos (tensorflow-serving-api) stay at the version
    # tfx-bsl allows; they only parse configs and requests, which are backward compatible.
    serving_image = compose()["services"]["tf-serving"]["image"]
    assert serving_image == f"tensorflow/serving:{pinned('tensorflow')}"


def setup_lists() -> dict[str, list[str]]:
    """setup.py's requirement lists (COMMON, AIRFLOW, WORKER, DEV), read without running it."""
    tree = ast.parse((PROJECT_ROOT / "setup.py").read_text())
    return {target.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name) and target.id.isupper()}


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def _installs(name: str) -> str:
    return " ".join(args for op, args in dockerfile_instructions(name) if op == "RUN" and "pip install" in args)


def test_images_install_only_their_side():
    """The lean Airflow image has no TensorFlow/Beam, the worker image no Airflow; compose's
    all-in-one image (its Celery workers run the steps) adds the celery and worker extras."""
    airflow_args = dict(a.split("=", 1) for op, a in dockerfile_instructions("airflow.Dockerfile") if op == "ARG")
    assert airflow_args["EXTRAS"] == "airflow" and '".[${EXTRAS}]"' in _installs("airflow.Dockerfile")
    assert '".[worker]"' in _installs("worker.Dockerfile")
    assert compose()["x-airflow"]["build"]["args"]["EXTRAS"] == "airflow,celery,worker"
    lists = setup_lists()
    heavy = {"tensorflow", "tf-keras", "tensorflow-transform", "tfx-bsl", "apache-beam"}
    assert not heavy & names(lists["AIRFLOW"] + lists["COMMON"])
    assert heavy <= names(lists["WORKER"])
    assert "apache-airflow" not in names(lists["WORKER"] + lists["COMMON"])


def test_every_copied_path_exists_and_installs_with_constraints():
    for name in ("airflow.Dockerfile", "worker.Dockerfile"):
        instructions = dockerfile_instructions(name)
        for op, args in instructions:
            if op == "COPY":
                sources = [a for a in args.split() if not a.startswith("--")][:-1]
                for source in sources:
                    assert (PROJECT_ROOT / source).exists(), (name, source)
        runs = " ".join(args for op, args in instructions if op == "RUN")
        assert "-c constraints.txt" in runs, name


def test_compose_builds_from_the_repo_and_runs_the_project_init():
    airflow = compose()["services"]["airflow-init"]
    assert airflow["build"]["dockerfile"] == "docker/airflow.Dockerfile"
    assert (DOCKER / airflow["build"]["context"] / "setup.py").exists()
    assert "reco_airflow_init" in " ".join(airflow["command"])
    assert Path(PROJECT_ROOT / "scripts" / "airflow_env.sh").exists()
    worker = dict(dockerfile_instructions("worker.Dockerfile"))
    assert "components.train.worker" in worker["CMD"]
    assert (PROJECT_ROOT / "components" / "train" / "worker" / "__main__.py").exists()


def _serving_flags() -> dict[str, str]:
    return dict(arg.lstrip("-").split("=", 1) for arg in compose()["services"]["tf-serving"]["command"])


def _mounted(container_path: str) -> Path:
    """The repo file a tf-serving container path is mounted from."""
    for volume in compose()["services"]["tf-serving"]["volumes"]:
        host, inside = volume.split(":")[:2]
        if container_path.startswith(inside + "/"):
            return DOCKER / host / container_path[len(inside) + 1:]
    raise AssertionError(f"{container_path} is not mounted into tf-serving")


# TF Serving's own protos for the two files (not in tensorflow-serving-api's pip package), vendored
# from the release docker-compose pins (docker/serving/protos/*, Apache-2.0, see each header).
PROTOS = DOCKER / "serving" / "protos"
BATCHING = "tensorflow.serving.BatchingParameters"
MONITORING = "tensorflow.serving.MonitoringConfig"


@pytest.fixture(scope="module")
def serving_protos(tmp_path_factory):
    """Compile the vendored protos with `python -m grpc_tools.protoc` (grpcio-tools) into a
    descriptor set: their TensorFlow and well-known imports come from the installed wheels' own
    descriptors, so nothing but TF Serving's two files is vendored. Returns full name -> class."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2
    from tensorflow.core.protobuf import config_pb2, named_tensor_pb2

    out = tmp_path_factory.mktemp("serving-protos")
    deps, seen = descriptor_pb2.FileDescriptorSet(), set()

    def add(file):
        if file.name not in seen:
            seen.add(file.name)
            for dependency in file.dependencies:
                add(dependency)
            file.CopyToProto(deps.file.add())

    for module in (wrappers_pb2, config_pb2, named_tensor_pb2):
        add(module.DESCRIPTOR)
    (out / "deps.pb").write_bytes(deps.SerializeToString())
    sources = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    assert sources == ["tensorflow_serving/config/monitoring_config.proto",
                       "tensorflow_serving/servables/tensorflow/session_bundle_config.proto"]
    # In a child: protoc's C++ protobuf and the one TensorFlow loaded into this process clash
    # (protoc.main segfaults here after a test has run a TF Session).
    protoc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={PROTOS}",
                             f"--descriptor_set_in={out / 'deps.pb'}", "--include_imports",
                             f"--descriptor_set_out={out / 'serving.pb'}", *sources],
                            capture_output=True, text=True, timeout=120)
    assert protoc.returncode == 0, f"protoc could not compile docker/serving/protos: {protoc.stderr}"
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString((out / "serving.pb").read_bytes()).file:
        pool.Add(file)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def parse_text_proto(path: Path, message_class):
    """`path` as TF Serving reads it (ParseProtoTextFile: text format, unknown fields refused)."""
    from google.protobuf import text_format

    return text_format.Parse(path.read_text(), message_class())


def test_the_vendored_protos_are_tf_serving_s_and_carry_its_licence():
    for path in PROTOS.rglob("*.proto"):
        text = path.read_text()
        assert "Licensed under the Apache License, Version 2.0" in text and "tag 2.20.0" in text, path
        assert "package tensorflow.serving;" in text, path
    assert "Apache License" in (PROTOS / "LICENSE").read_text()


def test_tf_serving_batches_exactly_the_shapes_the_push_warms_up(serving_protos):
    """The batching and monitoring files parse as TF Serving's BatchingParameters and
    MonitoringConfig (a misspelt or mistyped field fails here, not at the server's start), and
    the batcher's shapes are the push's warmup shapes."""
    from pipeline.config import load_config

    flags = _serving_flags()
    assert flags["enable_batching"] == "true" and int(flags["num_load_threads"]) >= 1
    batching = parse_text_proto(_mounted(flags["batching_parameters_file"]), serving_protos(BATCHING))
    allowed = list(batching.allowed_batch_sizes)
    # TF Serving's rules (session_bundle_config.proto): increasing, the last one max_batch_size.
    assert allowed == sorted(set(allowed)) and batching.max_batch_size.value == allowed[-1]
    assert batching.HasField("batch_timeout_micros") and batching.num_batch_threads.value >= 1
    env = compose()["x-airflow"]["environment"]
    pushed = load_config(env={"RECO__PUSH__WARMUP_BATCH_SIZES": env["RECO__PUSH__WARMUP_BATCH_SIZES"]})
    assert list(pushed.push.warmup_batch_sizes) == allowed
    monitoring = parse_text_proto(_mounted(flags["monitoring_config_file"]), serving_protos(MONITORING))
    assert monitoring.prometheus_config.enable
    assert monitoring.prometheus_config.path == "/monitoring/prometheus/metrics"


@pytest.mark.parametrize(("name", "typo"), [
    ("batching", ("max_batch_size {", "max_batch_sise {")),                     # unknown field
    ("batching", ("batch_timeout_micros { value: 1000 }", "batch_timeout_micros: 1000")),  # a wrapper, not int
    ("batching", ("allowed_batch_sizes: 8", "allowed_batch_sizes: eight")),      # not an int64
    ("monitoring", ("enable: true", "enabled: true")),                          # unknown field
    ("monitoring", ("prometheus_config {", "prometheus {")),                    # unknown message field
])
def test_a_wrong_field_in_a_serving_config_fails_the_parse(serving_protos, tmp_path, name, typo):
    from google.protobuf import text_format

    flags = _serving_flags()
    source = _mounted(flags[f"{name}_parameters_file" if name == "batching" else f"{name}_config_file"])
    text = source.read_text()
    assert typo[0] in text
    copy = tmp_path / source.name
    copy.write_text(text.replace(typo[0], typo[1], 1))
    with pytest.raises(text_format.ParseError):
        parse_text_proto(copy, serving_protos(BATCHING if name == "batching" else MONITORING))


def test_the_push_labels_versions_on_the_compose_tf_serving():
    env = compose()["x-airflow"]["environment"]
    assert env["RECO__PUSH__SERVING_URL"] == f"http://tf-serving:{_serving_flags()['rest_api_port']}"
    # The canary label goes on a version in the same write that asks the server to load it.
    assert _serving_flags()["allow_version_labels_for_unavailable_models"] == "true"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_closure(requirements: list[str]) -> set[str]:
    """Distributions `requirements` install (with their extras), transitively, from the installed metadata."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    seen, queue = set(), [(Requirement(r).name, set(Requirement(r).extras)) for r in requirements]
    while queue:
        name, extras = queue.pop()
        key = (_normal(name), frozenset(extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            wanted = not req.marker or any(req.marker.evaluate({"extra": e}) for e in extras | {""})
            if wanted:
                queue.append((req.name, set(req.extras)))
    return {name for name, _ in seen}


def _third_party_imports(package: Path, dists: dict[str, list[str]]) -> set[str]:
    modules = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return {m for m in modules if m in dists} - {"pipeline", "components"}


def test_the_worker_extra_provides_every_package_the_steps_import():
    """The worker image installs COMMON + WORKER only: every third-party module under components/
    and pipeline/ must come from them or their dependencies (the launcher pod once had no
    `kubernetes` client: only the Airflow provider had pulled it in)."""
    import importlib.metadata as md

    lists = setup_lists()
    provided = _requirement_closure(lists["COMMON"] + lists["WORKER"])
    dists = md.packages_distributions()           # import name -> distributions (slow: once)
    steps = _third_party_imports(PROJECT_ROOT / "components", dists)
    imports = steps | (_third_party_imports(PROJECT_ROOT / "pipeline", dists) - {"airflow", "pendulum"})  # DAG side
    missing = {m: dists[m] for m in imports if not any(_normal(d) in provided for d in dists[m])}
    assert missing == {}
    assert "airflow" not in steps


def test_compose_and_make_airflow_celery_share_one_set_of_celery_settings():
    """docker/celery.env is the one place: compose's Airflow services read it, the local stack
    script sources it; both run a `default` and a `training` worker, the train task's queue."""
    from pipeline.config import load_config

    shared = dict(line.split("=", 1) for line in (DOCKER / "celery.env").read_text().splitlines()
                  if line.strip() and not line.startswith("#"))
    assert shared["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    services = compose()["services"]
    for name in ("airflow-scheduler", "airflow-worker-default", "airflow-worker-training", "airflow-apiserver"):
        assert services[name]["env_file"] == "celery.env", name
        assert not set(shared) & set(services[name]["environment"]), name      # never set twice
    stack = (PROJECT_ROOT / "scripts" / "airflow_stack.sh").read_text()
    assert 'source "$ROOT/docker/celery.env"' in stack and "AIRFLOW__CORE__EXECUTOR" not in stack
    commands = [services[n]["command"] for n in ("airflow-worker-default", "airflow-worker-training")]
    queues = {command[command.index("--queues") + 1] for command in commands}
    assert queues == {"default", load_config(env={}).schedule.training_queue}
    assert "for queue in default training" in stack
