"""Names of the evaluation outputs and how to read the verdict (shared with push, no TF)."""
from __future__ import annotations

from pathlib import Path

METRICS_FILE = "metrics.json"
SAMPLE_FILE = "eval_sample.json"
# Sample row keys: the candidate's probability through serving_default, and through serving_by_id
CANDIDATE_PROBABILITY, BY_ID_PROBABILITY = "candidate_probability", "candidate_by_id_probability"
REPORT_FILE = "report.html"
BLESSED, NOT_BLESSED = "BLESSED", "NOT_BLESSED"


def read_verdict(eval_dir: Path) -> tuple[bool, list[str]] | None:
    """(blessed, lines) from the marker in `eval_dir`, or None when evaluation has not run."""
    for marker, blessed in ((BLESSED, True), (NOT_BLESSED, False)):
        path = eval_dir / marker
        if path.exists():
            return blessed, path.read_text().splitlines()[1:]
    return None
