"""report.html: the verdict first, then metrics, the AUC-gap interval, ROC and calibration
plots (PNG files beside the page) and the slice table. Plain HTML, no scripts: it opens from
an artifact store or an email attachment."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

_METRICS = ("count", "label_rate", "mean_prediction", "auc", "log_loss", "accuracy", "calibration")


def plot_roc(path: Path, label: np.ndarray, curves: dict[str, np.ndarray]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_auc_score, roc_curve

    fig, ax = plt.subplots(figsize=(5, 5))
    for name, prob in curves.items():
        fpr, tpr, _ = roc_curve(label, prob)
        ax.plot(fpr, tpr, label=f"{name} (AUC {roc_auc_score(label, prob):.3f})")
    ax.plot([0, 1], [0, 1], "k:", linewidth=1)
    ax.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_calibration(path: Path, label: np.ndarray, curves: dict[str, np.ndarray], bins: int = 10) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.calibration import calibration_curve

    fig, ax = plt.subplots(figsize=(5, 5))
    top = 0.0
    for name, prob in curves.items():
        frac, mean = calibration_curve(label, np.clip(prob, 0, 1), n_bins=bins, strategy="quantile")
        ax.plot(mean, frac, "o-", label=name)
        top = max(top, float(mean.max()), float(frac.max()))
    ax.plot([0, top], [0, top], "k:", linewidth=1)
    ax.set(xlabel="mean prediction (quantile bins)", ylabel="observed click rate", title="Calibration")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write_html(path: Path, metrics: dict[str, Any], plots: list[str]) -> None:
    verdict = metrics["verdict"]
    status = "BLESSED" if verdict["blessed"] else "NOT_BLESSED"
    color = "#1a7f37" if verdict["blessed"] else "#cf222e"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Evaluation {_e(metrics['run_date'])}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
        "td:first-child,th:first-child{text-align:left}</style></head><body>",
        f"<h1>Evaluation of run {_e(metrics['run_id'])}, data date {_e(metrics['run_date'])}</h1>",
        f"<h2 style='color:{color}'>{status}</h2>",
        _list("Reasons", verdict["reasons"]), _list("Checks passed", verdict["passed"]),
        _list("Notes", verdict["notes"]),
        f"<p>Candidate: <code>{_e(metrics['candidate_dir'])}</code><br>Baseline: "
        + (f"served version {metrics['baseline_version']} <code>{_e(metrics['baseline_dir'])}</code>"
           if metrics["baseline"] else "<b>none</b> (no model is served yet: absolute thresholds only)")
        + "</p>",
        "<h3>Overall</h3>", _metric_table(metrics),
        _bootstrap(metrics.get("bootstrap")),
        "".join(f"<img src='{_e(p)}' alt='{_e(p)}' style='margin:1em'>" for p in plots),
        "<h3>Slices</h3>", _slice_table(metrics["slices"], has_baseline=metrics["baseline"] is not None),
        "<h3>Rows skipped</h3>", _list("", [f"{k}: {v}" for k, v in sorted(metrics["rejected"].items())])
        or "<p>none</p>",
        "</body></html>",
    ]
    path.write_text("\n".join(p for p in parts if p))


def _metric_table(m: dict[str, Any]) -> str:
    rows = ["<table><tr><th>metric</th><th>candidate</th><th>baseline</th><th>delta</th></tr>"]
    for key in _METRICS:
        base = m["baseline"][key] if m["baseline"] else None
        rows.append(f"<tr><td>{key}</td><td>{_n(m['candidate'][key])}</td><td>{_n(base)}</td>"
                    f"<td>{_n(m['deltas'].get(key))}</td></tr>")
    return "".join(rows) + "</table>"


def _bootstrap(b: dict[str, Any] | None) -> str:
    if not b:
        return ""
    level = int(round(b["level"] * 100))
    text = (f"<p>Bootstrap over {b['users']} users ({b['samples']} replicates): candidate AUC "
            f"{level}% CI [{_n(b['candidate_auc']['low'])}, {_n(b['candidate_auc']['high'])}]")
    if "auc_diff" in b:
        d = b["auc_diff"]
        text += f"; AUC difference (candidate - baseline) {level}% CI [{_n(d['low'])}, {_n(d['high'])}]"
    return text + "</p>"


def _slice_table(rows: list[dict[str, Any]], has_baseline: bool) -> str:
    cols = ["slice", "value", "count", "label rate", "AUC", "log loss", "calibration"]
    cols += ["baseline AUC", "AUC delta"] if has_baseline else []
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>"
    out = ["<table>", head]
    for r in rows:
        if "skipped" in r:
            span = 7 if has_baseline else 5
            out.append(f"<tr><td>{_e(r['slice'])}</td><td>{_e(r['value'])}</td><td>{r['count']}</td>"
                       f"<td colspan='{span - 1}'>{_e(r['skipped'])}</td></tr>")
            continue
        c = r["candidate"]
        cells = [c["label_rate"], c["auc"], c["log_loss"], c["calibration"]]
        if has_baseline:
            b = r["baseline"]["auc"]
            cells += [b, None if b is None or c["auc"] is None else c["auc"] - b]
        out.append(f"<tr><td>{_e(r['slice'])}</td><td>{_e(r['value'])}</td><td>{r['count']}</td>"
                   + "".join(f"<td>{_n(x)}</td>" for x in cells) + "</tr>")
    return "".join(out) + "</table>"


def _list(title: str, items: list[str]) -> str:
    if not items:
        return ""
    head = f"<b>{_e(title)}</b>" if title else ""
    return head + "<ul>" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def _n(x: Any) -> str:
    if x is None:
        return "&ndash;"
    if isinstance(x, (int, np.integer)):
        return str(x)
    return f"{x:.4f}"


def _e(x: Any) -> str:
    return html.escape(str(x))
