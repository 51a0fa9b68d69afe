"""Which commands README.md and docs/*.md show, as test_doc_commands.py reads them (its docstring
says the rules), and the sandboxed driver that runs a CLI's --help or argument parse."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import PROJECT_ROOT

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


def snippets(doc: str):
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
    for line, text, block in snippets(doc):
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
