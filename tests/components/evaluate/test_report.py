"""report.html rendered from a small hand-made result (no TensorFlow, no pipeline run)."""
from __future__ import annotations

import ast
import copy
from pathlib import Path

import jinja2
import numpy as np
import pytest

from components.evaluate import metrics, report
from components.evaluate.run import _json_safe

REPO = Path(__file__).resolve().parents[3]
IMAGES = ["roc.png", "calibration.png"]
XSS = "slice <script>alert(1)</script> failed"


def _result(with_baseline: bool = True) -> dict:
    rng = np.random.default_rng(0)
    label = np.array([0, 1] * 20)
    probs = {"candidate": np.clip(0.3 + 0.4 * label + rng.normal(0, 0.1, 40), 0, 1)}
    if with_baseline:
        probs["baseline"] = np.clip(0.4 + 0.2 * label + rng.normal(0, 0.2, 40), 0, 1)
    cand = metrics.binary_metrics(label, probs["candidate"])
    base = metrics.binary_metrics(label, probs["baseline"]) if with_baseline else None
    platform = np.array(["ios"] * 24 + ["web"] * 16)
    return _json_safe({
        "run_date": "2026-11-04", "run_id": "scheduled__2026-11-04", "eval_date": "2026-11-04",
        "candidate_dir": "/models/<candidate>", "candidate_digest": "abc123",
        "baseline_dir": "/serving/reco/3" if with_baseline else None,
        "baseline_version": 3 if with_baseline else None,
        "candidate": cand, "baseline": base, "deltas": metrics.deltas(cand, base),
        "slices": metrics.slice_metrics(label, probs, {"platform": platform}, min_size=20),
        "bootstrap": metrics.user_bootstrap(label, np.arange(40) // 2, probs["candidate"],
                                            probs.get("baseline"), samples=20, seed=1),
        "thresholds": {"min_auc": 0.55, "max_log_loss": None, "max_auc_drop": 0.01},
        "rows_read": 45, "rejected": {"null_label": 3, "unknown_item": 2},
        "verdict": {"blessed": False, "reasons": ["AUC 0.5000 is below eval.min_auc 0.55", XSS],
                    "passed": [], "notes": []},
    })


def _render(tmp_path: Path, result: dict) -> str:
    out = tmp_path / "report.html"
    report.write_html(out, result, IMAGES)
    return out.read_text()


def test_report_shows_verdict_metrics_slices_and_escapes_data(tmp_path):
    result = _result()
    page = _render(tmp_path, result)
    assert "NOT_BLESSED" in page and "is below eval.min_auc 0.55" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert "/models/&lt;candidate&gt;" in page                     # paths are data too
    assert "served version 3" in page and "abc123" in page
    assert f"{result['candidate']['auc']:.4f}" in page and f"{result['deltas']['auc']:.4f}" in page
    assert "AUC difference (candidate - baseline) 95% CI" in page
    small = next(r for r in result["slices"] if "skipped" in r)     # "web": 16 rows < 20
    assert small["value"] == "web" and small["skipped"] in page
    assert "eval.min_auc" in page and "not set" in page             # thresholds, max_log_loss unset
    assert "Rows read: 45" in page and "null_label: 3" in page and "unknown_item: 2" in page
    assert "truncated" not in page                                  # optional key absent
    for name in IMAGES:
        assert f'src="{name}"' in page


def test_report_without_baseline_and_with_truncation_count(tmp_path):
    result = _result(with_baseline=False)
    result["verdict"] = {"blessed": True, "reasons": [], "passed": ["AUC 0.9 >= eval.min_auc 0.55"],
                         "notes": ["no baseline (no model is served yet): absolute thresholds only"]}
    result["history_truncated"] = 7
    page = _render(tmp_path, result)
    assert ">BLESSED<" in page and "no model is served yet" in page
    assert "baseline AUC" not in page and "AUC difference" not in page
    assert "truncated to the most recent ids (kept): 7" in page


@pytest.mark.parametrize("key", ["run_id", "rows_read", "thresholds"])
def test_missing_required_key_fails_loudly(tmp_path, key):
    result = copy.deepcopy(_result())
    del result[key]
    with pytest.raises(jinja2.UndefinedError):
        _render(tmp_path, result)


def test_template_is_shipped_as_package_data():
    tree = ast.parse((REPO / "setup.py").read_text())
    kw = next(k for node in ast.walk(tree) if isinstance(node, ast.Call)
              for k in node.keywords if k.arg == "package_data")
    package_data = ast.literal_eval(kw.value)
    shipped = {p for pattern in package_data["components.evaluate"]
               for p in (REPO / "components" / "evaluate").glob(pattern)}
    assert REPO / "components" / "evaluate" / "templates" / report.TEMPLATE in shipped
