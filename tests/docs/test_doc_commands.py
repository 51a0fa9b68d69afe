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
from pathlib import Path

import pytest

from pipeline.config import PROJECT_ROOT

pytestmark = pytest.mark.unit

ROOT = Path(PROJECT_ROOT)
DOCS = ("README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")))

PYTHONS = {"python", "python3", ".venv/bin/python", "$(PY)"}
SKIP = {
    "kubectl": "needs a Kubernetes cluster (manifests: tests/components/train/k8s)",
    "docker": "needs a Docker daemon and the compose stack (tests/docker)",
    "helm": "needs a Kubernetes cluster",
    "gcloud": "needs Google Cloud credentials",
    "curl": "needs a live server",
}
COMMAND_WORDS = {*PYTHONS, "make", "airflow", "source", *SKIP}
SHELL_FENCES = {"bash", "sh", "shell", "zsh"}
PROMPT_FENCES = {"console", ""}
TEMPLATES = {"components.<step>": [f"components.{p.parent.name}"
                                   for p in sorted((ROOT / "components").glob("*/__main__.py"))]}
PLACEHOLDERS = {
    "D": "2026-11-08", "YYYY-MM-DD": "2026-11-08", "DATE": "2026-11-08",
    "A": "2026-11-04", "B": "2026-11-05", "B+1": "2026-11-06",
    "N": "2", "I": "0", "W": "2", "$RECO_WORKER_INDEX": "0",
    "RUN": "doc-run", "run": "doc-run", "run_id": "doc-run", "ID": "doc-run",
    "TEXT": "doc reason", "F": "conf/params.yaml", "FILE": "conf/params.yaml",
}
PASS_THROUGH = {"components.preprocess": "Beam PipelineOptions (components/preprocess/run.py)"}
WORD = re.compile(r"^[a-z][a-z0-9_-]*$")
NUMBER = re.compile(r"^-\d")
OPERATORS = {"|", "||", "&&", ";", "&"}


# `python -c DRIVER MODULE JOBS_JSON`: each job [mode, args] runs `python -m MODULE *args` as
# runpy.run_module(alter_sys=True) does (what `python -m` does), its stdout/stderr captured, and
# prints one {"code", "out", "err", "extras"} line. "parse" stops argparse right after the outermost
# successful parse_args/parse_known_args (code 0, extras: what parse_known_args left over); a parse
# error is argparse's exit 2. One process per module: its imports are paid once (bench/__main__.py's
# os._exit is turned into an exit code so the next job runs).
DRIVER = r"""
import argparse, contextlib, io, json, os, runpy, sys, tempfile, traceback

TMP = os.path.realpath(tempfile.gettempdir())
SPAWN = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.fork", "os.forkpty", "os.spawn"}
CHANGES = {"os.mkdir", "os.remove", "os.rename", "os.replace", "os.rmdir", "shutil.rmtree", "os.truncate"}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
PROBES = {"uname", "ldconfig"}      # what imports run to probe the machine (platform, ctypes.util)
REAL_EXIT, STDOUT = os._exit, sys.stdout
current = {"job": None}


def program(event, args):
    if event == "os.system":
        return str(args[0]).split()[0]
    if event == "subprocess.Popen" and not args[0]:
        return args[1].split()[0] if isinstance(args[1], (str, bytes)) else args[1][0]
    return args[0] if args else ""


def outside_tmp(path):
    if isinstance(path, int):
        return False
    real = os.path.realpath(os.fsdecode(path))
    return real != os.devnull and not real.startswith(TMP + os.sep)


def guard(event, args):
    bad = event in SPAWN and os.path.basename(os.fsdecode(program(event, args) or "")) not in PROBES
    if event == "open":
        mode, flags = args[1], args[2]
        writes = any(c in mode for c in "wax+") if mode else bool((flags or 0) & WRITE_FLAGS)
        bad = writes and outside_tmp(args[0])
    elif event in CHANGES:
        bad = outside_tmp(args[0])
    if bad:
        os.write(2, f"DOC-COMMAND GUARD: job {current['job']}: {event} {args!r:.300}: the CLI did real work\n".encode())
        REAL_EXIT(97)


class Parsed(BaseException):
    pass


class Exited(BaseException):
    pass


stopping, depth = [False], [0]


def stop_after(orig):
    def wrapper(self, args=None, namespace=None):
        if not stopping[0]:
            return orig(self, args, namespace)
        depth[0] += 1
        try:
            result = orig(self, args, namespace)
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            raise Parsed(result)
        return result
    return wrapper


def fake_exit(code):
    raise Exited(code)


def run(module, mode, args):
    stopping[0], depth[0], extras = mode == "parse", 0, []
    out, err = io.StringIO(), io.StringIO()
    sys.argv, os._exit = [module, *args], fake_exit
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
                code = 0
                if mode == "parse":
                    code = 98
                    print("DOC-COMMAND: the CLI returned without parsing its arguments with argparse", file=sys.stderr)
            except Parsed as done:
                code, result = 0, done.args[0]
                extras = result[1] if isinstance(result, tuple) else []
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
                if not isinstance(done.code, (int, type(None))):
                    print(done.code, file=sys.stderr)
            except Exited as done:
                code = done.args[0]
            except BaseException:
                code = 1
                traceback.print_exc()
    finally:
        os._exit = REAL_EXIT
    return {"code": code, "out": out.getvalue(), "err": err.getvalue(), "extras": extras}


argparse.ArgumentParser.parse_args = stop_after(argparse.ArgumentParser.parse_args)
argparse.ArgumentParser.parse_known_args = stop_after(argparse.ArgumentParser.parse_known_args)
sys.dont_write_bytecode = True
sys.addaudithook(guard)
module, jobs = sys.argv[1], json.loads(sys.argv[2])
for n, (mode, args) in enumerate(jobs):
    current["job"] = f"{n} {mode} {args}"
    STDOUT.write(json.dumps(run(module, mode, args)) + "\n")
    STDOUT.flush()
STDOUT.close()
REAL_EXIT(0)    # a Beam or TensorFlow import may crash at interpreter exit
"""

# Beam's own option parser (every PipelineOptions subclass, allow_abbrev=False), as
# PipelineOptions.get_all_options builds it; prints, per flag list, the flags it does not know.
BEAM_CHECK = r"""
import json, sys
from apache_beam.options.pipeline_options import PipelineOptions
unknown = []
for flags in json.loads(sys.stdin.read()):
    parsers = []
    PipelineOptions(flags).get_all_options(add_extra_args_fn=parsers.append)
    unknown.append(parsers[0].parse_known_args(flags)[1])
print(json.dumps(unknown))
"""


@dataclass(frozen=True)
class Command:
    doc: str
    line: int
    text: str                   # as documented, notation expanded
    argv: tuple[str, ...]       # placeholders filled in
    sourced: tuple[str, ...]    # files an earlier `source` of the same block read

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def kind(self) -> str:
        word = self.argv[0]
        if word in PYTHONS:
            return "python" if len(self.argv) > 2 and self.argv[1] == "-m" else "unknown"
        if word in ("airflow", "make") or word in SKIP:
            return "skip" if word in SKIP else word
        if word in ("source", "."):
            return "source"
        return "function" if self.sourced else "unknown"

    @property
    def module_args(self) -> tuple[str, tuple[str, ...]]:
        """(module, arguments) of a python or airflow command."""
        if self.kind == "airflow":
            return "airflow", self.argv[1:]
        return self.argv[2], self.argv[3:]


# ---------------------------------------------------------------- extraction


def _snippets(doc: str):
    """(line, text, fence block id or None) of every candidate command line of one doc."""
    lines = (ROOT / doc).read_text().splitlines()
    prose = list(lines)
    i, block = 0, 0
    while i < len(lines):
        fence = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        block += 1
        lang, start = fence.group(2).lower(), i
        i += 1
        logical: list[tuple[int, str]] = []
        while i < len(lines) and not lines[i].strip().startswith(fence.group(1)):
            text = lines[i].rstrip()
            if logical and logical[-1][1].endswith("\\"):
                logical[-1] = (logical[-1][0], logical[-1][1][:-1] + " " + text.strip())
            else:
                logical.append((i + 1, text))
            i += 1
        for n in range(start, min(i + 1, len(lines))):
            prose[n] = ""
        i += 1
        for line, text in logical:
            text = text.strip()
            if lang == "console":
                text = text.removeprefix("$ ")
            if not text or text.startswith("#"):
                continue
            first = text.split()[0]
            if lang in SHELL_FENCES or (lang in PROMPT_FENCES and first in COMMAND_WORDS):
                yield line, text, block
    offset = 0
    for paragraph in "\n".join(prose).split("\n\n"):
        for span in re.finditer(r"(?<!`)`([^`]+)`(?!`)", paragraph):
            text = " ".join(span.group(1).split())
            if text.startswith(("python -m ", "make ")) or text.split(" ")[0] in COMMAND_WORDS - PYTHONS - {"make"}:
                yield offset + paragraph.count("\n", 0, span.start()) + 1, text, None
        offset += paragraph.count("\n") + 2


def _expand(text: str) -> list[str]:
    """Templates and `[a|b]` alternatives -> several commands; `[--opt X]` kept; prose `[...]` dropped."""
    for template, values in TEMPLATES.items():
        if template in text:
            return [t for v in values for t in _expand(text.replace(template, v))]
    alt = re.search(r"\[(\w[\w-]*(?:\|\w[\w-]*)+)\]", text)
    if alt:
        return [t for a in alt.group(1).split("|") for t in _expand(text[:alt.start()] + a + text[alt.end():])]
    text = re.sub(r"\[(-[^\[\]]*)\]", r"\1", text)
    return [" ".join(re.sub(r"\[[^\[\]-][^\[\]]*\]", "", text).split())]


def _tokens(text: str) -> list[list[str]]:
    text = re.sub(r"<(\w+)>", r"\1", text)
    text = re.sub(r"\$[({](\w+)[)}]", r"$\1", text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in OPERATORS:
            commands.append([])
        else:
            commands[-1].append(PLACEHOLDERS.get(token, token))
    return [c for c in commands if c]


def extract(doc: str) -> list[Command]:
    found: list[Command] = []
    sourced: dict[int, list[str]] = {}
    for line, text, block in _snippets(doc):
        for expanded in _expand(text):
            for argv in _tokens(expanded):
                read = tuple(sourced.get(block, [])) if block is not None else ()
                command = Command(doc, line, expanded, tuple(argv), read)
                if command.kind == "source" and block is not None and len(argv) > 1:
                    sourced.setdefault(block, []).append(argv[1])
                found.append(command)
    return found


COMMANDS = [c for doc in DOCS for c in extract(doc)]


def _split(command: Command) -> tuple[tuple[str, tuple[str, ...]], tuple[str, ...]]:
    """((module, subcommand words), the other arguments)."""
    module, args = command.module_args
    n = 0
    while n < len(args) and WORD.match(args[n]):
        n += 1
    return (module, tuple(args[:n])), tuple(args[n:])


CLI_COMMANDS = [c for c in COMMANDS if c.kind in ("python", "airflow")]
HELP_KEYS = sorted({_split(c)[0] for c in CLI_COMMANDS})
PARSED = sorted({(*_split(c)[0], _split(c)[1]) for c in CLI_COMMANDS if _split(c)[1]})
MAKE_TARGETS = sorted({t for c in COMMANDS if c.kind == "make" for t in c.argv[1:] if not t.startswith("-")})


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
