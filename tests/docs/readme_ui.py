"""The README's "Using it from the Airflow UI" section as commands a test runs as written.

A newcomer copies these lines; the tests execute the same lines, with only the README's own
placeholders filled in (the port, a password, a token, a run id), so the section cannot drift
from what works: tests/docs/test_readme_walkthrough.py runs the walk-through, the scheduler
story (tests/dags/test_scheduler_e2e.py) its approval of a forced push.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess

from pipeline.config import PROJECT_ROOT
from tests.docs.doc_commands import snippets

SECTION = "## Using it from the Airflow UI"
DOCUMENTED_URL = "http://127.0.0.1:8080"
PLACEHOLDER = re.compile(r"<[^<>]+>")


def commands() -> list[str]:
    """Every command of the section's fenced blocks, in order, without trailing comments (read as
    the doc-command tests read every doc: tests/docs/doc_commands.py)."""
    lines = (PROJECT_ROOT / "README.md").read_text().splitlines()
    start = lines.index(SECTION) + 1
    end = next((n for n in range(start, len(lines)) if lines[n].startswith("## ")), len(lines)) + 1
    return [re.split(r"\s+#\s", text, maxsplit=1)[0].strip()
            for line, text, block in snippets("README.md") if block is not None and start < line < end]


def the(prefix: str) -> str:
    """The one command of the section that starts with `prefix`."""
    found = [c for c in commands() if c.startswith(prefix)]
    assert len(found) == 1, (prefix, found)
    return found[0]


def fill(command: str, url: str, values: dict[str, str]) -> list[str]:
    """argv of a documented command against `url`, each `<placeholder>` replaced from `values`
    (keyed by the placeholder's text); a placeholder left unfilled fails the test."""
    command = command.replace(DOCUMENTED_URL, url)
    for name, value in values.items():
        command = command.replace(f"<{name}>", value)
    assert not PLACEHOLDER.search(command), f"unfilled placeholder in {command}"
    return shlex.split(command)


def curl_json(argv: list[str]) -> dict:
    """Run a documented curl call; its JSON answer (curl -s prints only the body)."""
    assert argv[0] == "curl", argv
    done = subprocess.run([*argv, "--fail-with-body"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (argv, done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)
