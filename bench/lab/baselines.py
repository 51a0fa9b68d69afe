"""Strong simple baselines on the same raw split the pipeline trains and is judged on.

The model we serve must beat these, not only yesterday's model: a constant click rate,
per-item click rates (`item_ctr`: the gate's item popularity, pipeline/contracts/popularity.py),
logistic regression on one-hot user and item ids, and a
logistic regression on content (image, category, platform) plus two history features built
from the catalog images of the history items (the mean history image's dot product with the
shown item's, and whether the shown item is in the history).
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score

from pipeline.contracts import features as F
from pipeline.contracts.inputs import latest_items_snapshot
from pipeline.contracts.popularity import ItemPopularity
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)


@dataclass
class Day:
    users: np.ndarray
    items: np.ndarray
    platform: np.ndarray
    history: list
    label: np.ndarray


def _events(paths: RunPaths, days: list[dt.date]) -> Day:
    columns = [F.USER_ID, F.ITEM_ID, F.PLATFORM, F.HISTORY, F.LABEL]
    table = pq.read_table([f for d in days for f in sorted(paths.events_dir(d).glob("*.parquet"))], columns=columns)
    return Day(table.column(F.USER_ID).to_numpy(), table.column(F.ITEM_ID).to_numpy(),
               np.array(table.column(F.PLATFORM).to_pylist(), dtype=object), table.column(F.HISTORY).to_pylist(),
               table.column(F.LABEL).to_numpy().astype(np.int64))


def _catalog(paths: RunPaths) -> tuple[dict[int, int], np.ndarray, np.ndarray]:
    """(item id -> row, L2-normalised images, category codes) of the eval day's snapshot."""
    snapshot = latest_items_snapshot(paths.raw_root, paths.eval_date)
    table = pq.read_table(paths.items_dir(snapshot), columns=[F.ITEM_ID, F.IMAGE, F.CATEGORY])
    images = np.asarray(table.column(F.IMAGE).to_pylist(), dtype=np.float32)
    images /= np.maximum(np.linalg.norm(images, axis=1, keepdims=True), 1e-6)
    _, categories = np.unique(np.array(table.column(F.CATEGORY).to_pylist(), dtype=object), return_inverse=True)
    return {int(i): r for r, i in enumerate(table.column(F.ITEM_ID).to_pylist())}, images, categories


def _metrics(label: np.ndarray, prob: np.ndarray) -> dict[str, float]:
    prob = np.clip(prob, 1e-6, 1 - 1e-6)
    return {"auc": float(roc_auc_score(label, prob)), "log_loss": float(log_loss(label, prob))}


def _one_hot(values: np.ndarray, vocab: dict) -> sparse.csr_matrix:
    cols = np.array([vocab.get(v, len(vocab)) for v in values.tolist()])
    return sparse.csr_matrix((np.ones(len(cols)), (np.arange(len(cols)), cols)), shape=(len(cols), len(vocab) + 1))


def _ids_lr(train: Day, test: Day) -> np.ndarray:
    users = {u: i for i, u in enumerate(np.unique(train.users).tolist())}
    items = {v: i for i, v in enumerate(np.unique(train.items).tolist())}
    x = lambda d: sparse.hstack([_one_hot(d.users, users), _one_hot(d.items, items)]).tocsr()  # noqa: E731
    model = LogisticRegression(C=0.5, max_iter=500).fit(x(train), train.label)
    return model.predict_proba(x(test))[:, 1]


def _history_hot(day: Day, vocab: dict) -> sparse.csr_matrix:
    """Multi-hot of each row's history items (ids the window showed), scaled to unit row sum."""
    rows, cols, vals = [], [], []
    for r, history in enumerate(day.history):
        known = [vocab[h] for h in (history or []) if h in vocab]
        for c in set(known):
            rows.append(r)
            cols.append(c)
            vals.append(1.0 / len(set(known)))
    return sparse.csr_matrix((vals, (rows, cols)), shape=(len(day.history), len(vocab) + 1))


def _item_history_user_lr(train: Day, test: Day) -> np.ndarray:
    """Logistic regression on one-hot item and user and the multi-hot history: the simple
    baseline that beats item popularity on real data where who the user is matters."""
    users = {u: i for i, u in enumerate(np.unique(train.users).tolist())}
    items = {v: i for i, v in enumerate(np.unique(train.items).tolist())}
    x = lambda d: sparse.hstack([_one_hot(d.users, users), _one_hot(d.items, items),  # noqa: E731
                                 _history_hot(d, items)]).tocsr()
    model = LogisticRegression(C=0.5, max_iter=1000).fit(x(train), train.label)
    return model.predict_proba(x(test))[:, 1]


def _content_features(day: Day, index: dict[int, int], images: np.ndarray, categories: np.ndarray) -> np.ndarray:
    rows = np.array([index.get(int(i), -1) for i in day.items])
    target = np.where(rows[:, None] >= 0, images[np.maximum(rows, 0)], 0.0)
    hist_mean = np.zeros_like(target)
    in_history = np.zeros(len(rows), dtype=np.float32)
    for k, history in enumerate(day.history):
        found = [index[h] for h in history or [] if h in index]
        if found:
            hist_mean[k] = images[found].mean(axis=0)
        in_history[k] = float(int(day.items[k]) in set(history or []))
    cat = np.eye(categories.max() + 2, dtype=np.float32)[np.where(rows >= 0, categories[np.maximum(rows, 0)], -1)]
    plat = np.stack([day.platform == p for p in F.PLATFORMS], axis=1).astype(np.float32)
    dot = (hist_mean * target).sum(axis=1, keepdims=True)
    return np.hstack([target, cat, plat, dot, in_history[:, None]]).astype(np.float32)


def _content_lr(train: Day, test: Day, paths: RunPaths) -> np.ndarray:
    index, images, categories = _catalog(paths)
    x_train = _content_features(train, index, images, categories)
    model = LogisticRegression(C=0.1, max_iter=300).fit(x_train, train.label)
    return model.predict_proba(_content_features(test, index, images, categories))[:, 1]


def baselines(paths: RunPaths) -> dict[str, dict[str, float]]:
    """{baseline name: {auc, log_loss}} on the run's eval day, fitted on its training window."""
    train, test = _events(paths, paths.train_dates), _events(paths, [paths.eval_date])
    rate = train.label.mean()
    per_item = ItemPopularity.fit(train.items, train.label)(test.items)
    out = {"constant": _metrics(test.label, np.full(len(test.label), rate)),
           "item_ctr": _metrics(test.label, per_item),
           "lr_user_item": _metrics(test.label, _ids_lr(train, test)),
           "lr_item_history_user": _metrics(test.label, _item_history_user_lr(train, test)),
           "lr_content_history": _metrics(test.label, _content_lr(train, test, paths))}
    log.info("baselines: %s", out)
    return out
