"""Names of the evaluation outputs and how to read the verdict (shared with push, no TF)."""
from __future__ import annotations

from pathlib import Path

METRICS_FILE = "metrics.json"
SAMPLE_FILE = "eval_sample.json"
REPORT_FILE = "report.html"
BLESSED, NOT_BLESSED = "BLESSED", "NOT_BLESSED"


def read_verdict(eval_dir: Path) -> tuple[bool, list[str]] | None:
    """(blessed, lines) from the marker in `eval_dir`, or None when evaluation has not run."""
    for marker, blessed in ((BLESSED, True), (NOT_BLESSED, False)):
        path = eval_dir / marker
        if path.exists():
            return blessed, path.read_text().splitlines()[1:]
    return None
