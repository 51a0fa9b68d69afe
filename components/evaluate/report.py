"""report.html: the verdict first, then metrics, the AUC-gap interval, thresholds, ROC and
calibration plots (PNG files beside the page), the slice table and the row counts. Plain
HTML, no scripts: it opens from an artifact store or an email attachment.

The page is a Jinja2 template (templates/report.html.j2, shipped as package data) instead of
string concatenation: the layout reads as HTML, and autoescape is on, so reasons, paths and
slice values (all data, some of it derived from input rows) can never inject markup.
StrictUndefined makes a missing required field fail the render loudly instead of printing an
empty cell; optional fields are read with `result.get(...)` in the template.
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from markupsafe import Markup

from pipeline.contracts.evaluation import BLESSED, NOT_BLESSED

log = logging.getLogger(__name__)

TEMPLATE = "report.html.j2"
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


def plot_trend(path: Path, rows: list[dict[str, Any]]) -> None:
    """The last nights' AUCs (candidate, served model, the pushed model on the next day, item
    popularity); NOT_BLESSED nights marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    dates = [r["run_date"][5:] for r in rows]
    for key, style, name in (("candidate_auc", "o-", "candidate"), ("served_auc", "s--", "served model"),
                             ("pushed_next_day_auc", "D-", "pushed model, the next day"),
                             ("popularity_auc", "^:", "item popularity")):
        values = [r.get(key) if r.get(key) is not None else float("nan") for r in rows]
        ax.plot(dates, values, style, label=name)
    for i, r in enumerate(rows):
        if r["candidate_auc"] is not None and not r["blessed"]:
            ax.annotate("NOT_BLESSED", (i, r["candidate_auc"]), fontsize=7, rotation=45, color="firebrick")
    ax.set(xlabel="data date", ylabel="eval-day AUC", title=f"The last {len(rows)} nights")
    ax.legend(loc="lower left", fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write_html(path: Path, result: dict[str, Any], images: list[str]) -> None:
    """Render report.html from the (JSON-safe) evaluation `result`; `images` sit beside it."""
    marker = BLESSED if result["verdict"]["blessed"] else NOT_BLESSED
    page = _env().get_template(TEMPLATE).render(result=result, images=images, marker=marker,
                                                metric_keys=_METRICS)
    path.write_text(page)
    log.info("wrote %s (%s)", path, marker)


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("components.evaluate", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = _num
    return env


def _num(x: Any) -> str | Markup:
    """A metric cell: en dash for None (undefined), integers as-is, floats to 4 decimals."""
    if x is None:
        return Markup("&ndash;")
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(x)
    return f"{x:.4f}"
