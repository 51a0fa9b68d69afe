"""Every command README.md and docs/*.md show, run as far as it runs without a cluster.

What is a command: each line of a ```bash / ```sh / ```shell block (`\\` continuations joined, `#`
comments dropped); the lines of a ```console or untyped block that start with a command word
(COMMAND_WORDS; the other lines of those blocks are output or diagrams); each inline code span that
starts with `python -m `, `make ` or a command word. ```python and other languages are code, not
commands. A line is split at `|`, `||`, `&&`, `;` and `&` into commands. Notation is expanded
first: `components.<step>` (TEMPLATES) once per step, `[a|b|c]` once per alternative, an optional
`[--flag ...]` kept, a prose `[beam flags]` dropped, and placeholders (`D`, `<D>`, `N`, `RUN`, ...,
PLACEHOLDERS) filled in.

What each command gets:

- `python -m MODULE [WORDS] [ARGS]`, and `airflow ...` (= `python -m airflow`):
  `MODULE [WORDS] --help` exits 0, once per distinct module and leading subcommand words (the
  module and the subcommand exist). When the command passes ARGS (a flag, or a positional that is
  not a plain word), the real `python -m` entry point parses them with the CLI's own argparse
  parser, stopped right after a successful parse so nothing runs (DRIVER), and every flag it passes
  must be in the `--help` text (argparse would also accept an abbreviation). Flags a CLI hands
  over on purpose (PASS_THROUGH: components.preprocess gives its unknown flags to Beam) must be
  accepted by that parser instead. A command of words only (`python -m bench quality`) names a (sub)command: --help.
- `make TARGET`: `make -n -f Makefile TARGET` exits 0 (-n runs no recipe).
- `source FILE`: FILE exists; a shell function the same block calls next must be defined in it.
- SKIP (kubectl, docker, helm, gcloud, curl): need a cluster or a live server; each is reported as
  a skipped test with its reason, never dropped silently.
- Anything else fails `test_every_command_has_a_rule`.

Every check runs in a subprocess (one per module, all concurrently: the file takes ~15 s on 2
cores) under an audit hook that kills it (exit 97) if it starts a program or writes outside the
temp dir, i.e. if a CLI would do real work instead of printing its help or parsing.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from tests.docs.doc_commands import (
    BEAM_CHECK,
    CLI_COMMANDS,
    COMMANDS,
    DRIVER,
    HELP_KEYS,
    MAKE_TARGETS,
    NUMBER,
    PARSED,
    PASS_THROUGH,
    ROOT,
    SKIP,
    _split,
)

pytestmark = pytest.mark.unit


def _where(predicate) -> str:
    return ", ".join(sorted({c.where for c in CLI_COMMANDS if predicate(c)}))


def _shown(module: str, words, args=()) -> str:
    head = "airflow" if module == "airflow" else f"python -m {module}"
    return " ".join([head, *words, *(shlex.quote(a) for a in args)])


def _id(text: str) -> str:
    return text.encode("ascii", "replace").decode()[:110]


# ---------------------------------------------------------------- running


def _run(env: dict, argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        return subprocess.CompletedProcess(argv, -1, err.stdout or "", f"{err.stderr}\ntimed out after {timeout} s")


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    extras: list


def _outcomes(jobs: list[tuple[str, list[str]]], proc: subprocess.CompletedProcess) -> list[Outcome]:
    """One Outcome per job; a job the driver did not report gets the process's own exit and stderr."""
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"code"')]
    done = [Outcome(r["code"], r["out"], r["err"], r["extras"]) for r in lines]
    lost = Outcome(proc.returncode if proc.returncode else 99, "", f"the driver stopped:\n{proc.stderr}", [])
    return done + [lost] * (len(jobs) - len(done))


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    """Every check's outcome: one driver process per module, the processes run concurrently."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONDONTWRITEBYTECODE": "1", "AIRFLOW_HOME": str(tmp_path_factory.mktemp("airflow_home")),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    run = functools.partial(_run, env)
    per_module: dict[str, list] = {}
    for module, words in HELP_KEYS:
        per_module.setdefault(module, []).append((("help", (module, words)), ["help", [*words, "--help"]]))
    for module, words, args in PARSED:
        per_module.setdefault(module, []).append((("parse", (module, words, args)), ["parse", [*words, *args]]))
    argvs = {m: [sys.executable, "-c", DRIVER, m, json.dumps([job for _, job in jobs])]
             for m, jobs in per_module.items()}
    makes = {("make", t): ["make", "-n", "-f", "Makefile", t] for t in MAKE_TARGETS}
    done: dict = {}
    # Beam's import (2 s) overlaps the rest; it reads the flag lists once the parses are done.
    beam_check = subprocess.Popen([sys.executable, "-c", BEAM_CHECK], cwd=ROOT, env=env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with ThreadPoolExecutor(max_workers=4) as pool:
        make_runs = pool.map(run, makes.values())
        for module, proc in zip(argvs, pool.map(run, argvs.values())):
            jobs = per_module[module]
            done |= dict(zip([key for key, _ in jobs], _outcomes([job for _, job in jobs], proc)))
        done |= {key: Outcome(p.returncode, p.stdout, p.stderr, []) for key, p in zip(makes, make_runs)}
    beam = [key for key, outcome in done.items()
            if key[0] == "parse" and key[1][0] in PASS_THROUGH and outcome.returncode == 0 and outcome.extras]
    try:
        out, err = beam_check.communicate(json.dumps([done[key].extras for key in beam]), timeout=300)
    except subprocess.TimeoutExpired:
        beam_check.kill()
        out, err = beam_check.communicate()
    unknown = json.loads(out.strip().splitlines()[-1]) if beam_check.returncode == 0 else [None] * len(beam)
    done |= {("beam", key[1]): Outcome(beam_check.returncode, json.dumps(u), err, []) for key, u in zip(beam, unknown)}
    return done


def _output(proc) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-2000:]}\n--- stderr\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("key", HELP_KEYS, ids=[_id(_shown(m, w) + " --help") for m, w in HELP_KEYS])
def test_help_exits_0(key, ran):
    proc = ran[("help", key)]
    assert proc.returncode == 0, (
        f"`{_shown(*key)} --help` (documented at {_where(lambda c: _split(c)[0] == key)}) failed:\n{_output(proc)}")


def _flags(args) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("-") and len(a) > 1 and not NUMBER.match(a)]


@pytest.mark.parametrize("parsed", PARSED, ids=[_id(_shown(*p)) for p in PARSED])
def test_documented_arguments_parse(parsed, ran):
    module, words, args = parsed
    shown = _shown(module, words, args)
    where = _where(lambda c: (*_split(c)[0], _split(c)[1]) == parsed)
    proc = ran[("parse", parsed)]
    assert proc.returncode == 0, f"`{shown}` (documented at {where}) is refused by the CLI's parser:\n{_output(proc)}"
    extras = proc.extras
    passed_on = set(_flags(extras))
    if extras:
        assert module in PASS_THROUGH, f"{where}: `{shown}`: {module} ignores {extras}"
        beam = ran[("beam", parsed)]
        assert beam.returncode == 0, _output(beam)
        unknown = json.loads(beam.stdout)
        assert not unknown, f"{where}: `{shown}`: {PASS_THROUGH[module]} does not know {unknown}"
    help_text = ran[("help", (module, words))].stdout
    missing = [f for f in _flags(args) if f not in passed_on
               and not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", help_text)]
    assert not missing, f"{where}: `{shown}`: {missing} not in `{_shown(module, words)} --help`:\n{help_text}"


@pytest.mark.parametrize("target", MAKE_TARGETS)
def test_make_target_exists(target, ran):
    proc = ran[("make", target)]
    where = ", ".join(sorted({c.where for c in COMMANDS if c.kind == "make" and target in c.argv[1:]}))
    assert proc.returncode == 0, f"`make {target}` (documented at {where}) is not a Makefile target:\n{_output(proc)}"


SHELL = [c for c in COMMANDS if c.kind in ("source", "function")]


@pytest.mark.parametrize("command", SHELL, ids=[_id(f"{c.where} {c.text}") for c in SHELL])
def test_sourced_scripts_and_their_functions_exist(command):
    if command.kind == "source":
        assert len(command.argv) > 1 and (ROOT / command.argv[1]).is_file(), f"{command.where}: `{command.text}`"
        return
    name = command.argv[0]
    defined = [f for f in command.sourced if (ROOT / f).is_file()
               and re.search(rf"^\s*(function\s+)?{re.escape(name)}\s*(\(\s*\))?\s*\{{", (ROOT / f).read_text(), re.M)]
    assert defined, f"{command.where}: `{command.text}`: {name} is defined in none of {command.sourced}"


SKIPPED = [c for c in COMMANDS if c.kind == "skip"]


@pytest.mark.parametrize("command", SKIPPED, ids=[_id(f"{c.where} {' '.join(c.argv)}") for c in SKIPPED])
def test_cluster_commands_are_skipped_by_rule(command):
    pytest.skip(f"{command.where}: `{' '.join(command.argv)}`: {SKIP[command.argv[0]]}")


def test_every_command_has_a_rule():
    unknown = [f"{c.where}: `{c.text}`" for c in COMMANDS if c.kind == "unknown"]
    assert not unknown, "commands no rule of this file covers (add one):\n" + "\n".join(unknown)


def test_the_runbook_and_readme_commands_are_found():
    """A change of notation the extraction misses must fail here, not pass with nothing checked."""
    for doc, kinds in {"README.md": {"python", "make", "airflow"},
                       "docs/operations.md": {"python", "make", "airflow", "source"}}.items():
        assert kinds <= {c.kind for c in COMMANDS if c.doc == doc}, doc
    pushes = [c for c in COMMANDS
              if c.doc == "docs/operations.md" and c.argv[:3] == ("python", "-m", "components.push")]
    assert len(pushes) >= 4, pushes
