"""Every test a doc cites as evidence (`tests/…/test_x.py::test_name`) exists: a renamed or
merged test otherwise leaves the runbook pointing at nothing (docs/operations.md did)."""
from __future__ import annotations

import ast
import re

import pytest

from tests.docs.doc_commands import DOCS, ROOT

pytestmark = pytest.mark.unit
CITED = re.compile(r"\b(tests/[\w/]+\.py)(?:::(\w+))?")


def cited_tests() -> list[tuple[str, str, str | None]]:
    return [(doc, m.group(1), m.group(2)) for doc in DOCS
            for m in CITED.finditer((ROOT / doc).read_text())]


def defined_names(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def test_docs_cite_tests_at_all():
    assert len(cited_tests()) >= 10          # the parser still finds the citations


def test_every_cited_test_file_and_function_exists():
    missing = [f"{doc}: {path}" + (f"::{name}" if name else "") for doc, path, name in cited_tests()
               if not (ROOT / path).is_file() or (name and name not in defined_names(path))]
    assert not missing, missing
