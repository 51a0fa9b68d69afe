"""JSON Lines logs for `python -m pipeline import-ratings --format jsonl`: one object per line,
as Amazon Reviews ('23: `user_id`, `parent_asin`, `rating`, `timestamp` in ms; its meta file
`parent_asin`, `title`, `categories`), Yelp (`user_id`, `business_id`, `stars`, `date` without a
zone) and Goodreads write them. Fields are read as the text a CSV would hold, so ratings_read.py
parses both alike."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.datagen.ratings_read import BOM, RatingsImportError


def _json_text(value: Any, name: str, where: str) -> str:
    """A JSON value as the text a CSV would hold: null is empty, a list of values is '|'-joined."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "|".join(_json_text(v, name, where) for v in value)
    if isinstance(value, dict):
        raise RatingsImportError(f"{where}: field {name!r} holds an object, not a value (--column names another)")
    return str(value).lower() if isinstance(value, bool) else str(value)


def read_jsonl(path: Path, required: tuple[str, ...], source: dict[str, str],
               encoding: str) -> tuple[dict[str, pa.Array], np.ndarray]:
    """The fields of a JSON Lines file (one object per line) named by `source` (contract name ->
    the file's; those in `required` on every line) as text by their contract names, and the line
    of each row. Read line by line (a review's text is not kept): any size streams."""
    values: dict[str, list[str]] = {c: [] for c in source}
    present, numbers = set(), []
    try:
        with open(path, encoding=encoding) as file:
            for n, line in enumerate(file, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line.removeprefix(BOM) if n == 1 else line)
                except json.JSONDecodeError as err:
                    raise RatingsImportError(f"{path}:{n}: not a JSON object: {err.msg}") from err
                if not isinstance(row, dict):
                    raise RatingsImportError(f"{path}:{n}: not a JSON object: {line.strip()[:60]!r}")
                for c, name in source.items():
                    if name in row:
                        present.add(c)
                    elif c in required:
                        raise RatingsImportError(f"{path}:{n}: no field {name!r} (--column maps a contract name "
                                                 f"to yours)")
                    values[c].append(_json_text(row.get(name), name, f"{path}:{n}"))
                numbers.append(n)
    except OSError as err:
        raise RatingsImportError(f"{path}: cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise RatingsImportError(f"{path}: not {encoding} text: name the file's encoding (--encoding)") from err
    if not numbers:
        raise RatingsImportError(f"{path}: no rows")
    return {c: pa.array(v, pa.string()) for c, v in values.items() if c in present}, np.asarray(numbers, np.int64)
