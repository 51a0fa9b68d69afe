"""The package structure, read from the source: contracts in pipeline/, no cycles, no reaching in.

Static (AST) so it sees lazy imports inside functions too, and costs no TensorFlow import.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from pipeline.config import PROJECT_ROOT

PACKAGES = ("pipeline", "components", "airflow_glue", "dags")
HEAVY = ("tensorflow", "tf_keras", "apache_beam", "tensorflow_transform", "tfx_bsl")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (PROJECT_ROOT / pkg).rglob("*.py")}


def _imports(path: Path, known: set[str]) -> set[str]:
    """Absolute module names `path` imports; `from pkg import sub` counts as importing pkg.sub."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names} & known
            found.update(subs or {node.module})
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, set(modules)) for name, path in modules.items()}


def _component(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "components" and len(parts) > 1 else None


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_components_never_import_each_other():
    """A rule two steps share lives in pipeline/contracts; a step's code is its own."""
    offences = [f"{mod} imports {imp}" for mod, imps in _graph().items() for imp in imps
                if _component(mod) and _component(imp) and _component(imp) != _component(mod)]
    assert not offences, "cross-component imports must go through pipeline/contracts:\n" + "\n".join(offences)


def test_no_cycle_between_components_nor_between_modules():
    graph = _graph()
    packages: dict[str, set[str]] = {}
    for mod, imps in graph.items():
        if _component(mod):
            packages.setdefault(_component(mod), set()).update(
                _component(i) for i in imps if _component(i) and _component(i) != _component(mod))
    assert _cycle(packages) is None, f"component cycle: {_cycle(packages)}"
    local = {m: {i for i in imps if i in graph and not (m.startswith(i + ".") and i.count(".") == 1)}
             for m, imps in graph.items()}
    assert _cycle(local) is None, f"module cycle: {_cycle(local)}"


def test_pipeline_and_dags_never_import_components_or_tensorflow():
    offences = [f"{mod} imports {imp}" for mod, imps in _graph().items() if not mod.startswith("components")
                for imp in imps if imp.split(".")[0] in ("components", *HEAVY)]
    assert not offences, "\n".join(offences)


def test_only_the_dag_and_the_airflow_glue_import_airflow():
    """pipeline/ and components/ are plain Python (the CLI, the tests and the pods run them
    without Airflow); the Airflow side lives in airflow_glue/, which they never import."""
    offences = [f"{mod} imports {imp}" for mod, imps in _graph().items()
                if mod.split(".")[0] in ("pipeline", "components")
                for imp in imps if imp.split(".")[0] in ("airflow", "airflow_glue")]
    assert not offences, "\n".join(offences)


def test_the_summary_task_imports_neither_sklearn_nor_pyarrow(tmp_path):
    code = f"""
import sys
from pipeline.orchestration import RunSpec, summarize
spec = RunSpec("2026-11-04", "summary", {{"data.artifact_root": {str(tmp_path)!r},
                                          "data.serving_base": {str(tmp_path / "serving")!r}}})
summary = summarize(spec, {{}}, "gate skipped")
heavy = sorted(m for m in ("sklearn", "pyarrow", "numpy", "tensorflow", "apache_beam") if m in sys.modules)
print(summary["served_version"], heavy)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.split("\n")[-2] == "None []"


# Who may import whom inside components/train (the rooms' __init__ docstrings say why).
TRAIN_ROOMS = {
    "model": {"model"},
    "worker": {"model", "worker", "gang.heartbeat", "gang.lab"},
    "gang": {"gang"},
    "k8s": {"k8s", "gang.worker_spec", "gang.heartbeat", "gang.launcher"},
}
LIGHT_ROOMS = ("gang", "k8s")       # the launching task's process: no TensorFlow there


def _train_room(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[2:]) if parts[:2] == ["components", "train"] and len(parts) > 2 else None


def test_train_rooms_import_only_what_their_docstrings_allow():
    offences = []
    for mod, imps in _graph().items():
        room = (_train_room(mod) or "").split(".")[0]
        if room not in TRAIN_ROOMS:
            continue
        for imp in imps:
            target = _train_room(imp)
            if target is not None and not any(target == ok or target.startswith(ok + ".")
                                              for ok in TRAIN_ROOMS[room]):
                offences.append(f"{mod} imports {imp}")
            if room in LIGHT_ROOMS and imp.split(".")[0] in HEAVY:
                offences.append(f"{mod} imports {imp} (a launcher never imports TensorFlow)")
    assert not offences, "\n".join(offences)


def test_train_has_only_its_rooms_and_its_entry_point():
    top = {p.name for p in (PROJECT_ROOT / "components" / "train").iterdir() if not p.name.startswith("__pycache__")}
    assert top == {"__init__.py", "__main__.py", "run.py", *TRAIN_ROOMS}, top
    for room in TRAIN_ROOMS:
        assert ast.get_docstring(ast.parse((PROJECT_ROOT / "components" / "train" / room / "__init__.py").read_text()))


def test_the_throughput_benchmarks_never_import_the_model_lab():
    """bench/ measures speed, memory and cost; bench/lab/ judges models (quality, replays). The lab
    may use bench's shared helpers, never the other way round, and neither is imported by the product."""
    bench = {_module_name(p): p for p in (PROJECT_ROOT / "bench").rglob("*.py")}
    graph = {name: _imports(path, set(bench)) for name, path in bench.items()}
    offences = [f"{mod} imports {imp}" for mod, imps in graph.items() if not mod.startswith("bench.lab")
                for imp in imps if imp.startswith("bench.lab")]
    offences += [f"{mod} imports {imp}" for mod, imps in _graph().items()
                 for imp in imps if imp.split(".")[0] == "bench"]
    assert not offences, "\n".join(offences)
