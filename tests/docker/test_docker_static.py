"""No Docker engine here: check statically what can be checked, so the images and compose file line up."""
import ast
import re
from pathlib import Path

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


def test_tf_serving_batches_exactly_the_shapes_the_push_warms_up():
    """TF Serving's parsers for these two files are not in tensorflow-serving-api's pip package
    (no MonitoringConfig or BatchingParameters protos there): their fields are checked here."""
    from pipeline.config import load_config

    flags = _serving_flags()
    assert flags["enable_batching"] == "true" and int(flags["num_load_threads"]) >= 1
    batching = _mounted(flags["batching_parameters_file"]).read_text()
    allowed = [int(v) for v in re.findall(r"^allowed_batch_sizes: (\d+)$", batching, re.MULTILINE)]
    assert int(re.search(r"max_batch_size \{ value: (\d+) \}", batching).group(1)) == max(allowed)
    env = compose()["x-airflow"]["environment"]
    pushed = load_config(env={"RECO__PUSH__WARMUP_BATCH_SIZES": env["RECO__PUSH__WARMUP_BATCH_SIZES"]})
    assert list(pushed.push.warmup_batch_sizes) == allowed == sorted(allowed)
    monitoring = _mounted(flags["monitoring_config_file"]).read_text()
    assert re.search(r"prometheus_config \{\s+enable: true\s+path: \"/monitoring/prometheus/metrics\"", monitoring)


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
