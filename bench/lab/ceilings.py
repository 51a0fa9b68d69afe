"""How much of a world's signal the data can show: two ceilings beside the generator's.

The generator's `ceiling_auc` is a logistic regression on the true hidden factors of user and
item: no model reaches it, since a user's taste shows only through a short history of their
favourite items. Two logistic regressions that know every item perfectly (its true appeal and
hidden factors) but a user only as a request shows them bracket what a model can get:

- `appeal`: the true appeal of the shown item and the platform. Popularity known exactly.
- `content`: that, plus the products of the shown item's true factors with the mean true factors
  of the history's items, and whether the shown item is in the history: taste as far as the
  history reveals it.

Both are fitted on as many requests as the training window holds and scored on the eval day's
users, as the model is. A model learns an item's appeal from its clicks and content, so it sits
below `content` except where user ids carry taste (returning users). The gap `content - appeal`
is what reading the history is worth on a world; a goal asking the model to beat popularity by
more than that asks for more than the data shows.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from pipeline.contracts import features as F
from pipeline.datagen.drift import DriftingWorld
from pipeline.datagen.regimes import day_key
from pipeline.datagen.world import World

EVAL_REQUESTS = 40_000


def _requests(world: World, key: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels, appeal + platform features, history features) of `n` requests of day `key`."""
    pop = world.population(key)
    users, items = world.sample_impressions(rng, n, pop)
    offsets, history = world.sample_histories(rng, pop, users)
    labels = rng.random(n) < 1 / (1 + np.exp(-world.click_logit(pop, users, items)))
    lengths = np.diff(offsets)
    owner = np.repeat(np.arange(n), lengths)
    mean = np.zeros((n, world.item_factors.shape[1]))
    np.add.at(mean, owner, world.item_factors[history])
    mean /= np.maximum(lengths, 1)[:, None]
    seen = np.bincount(owner, weights=history == items[owner], minlength=n) > 0
    appeal = np.column_stack([world.item_popularity[items], np.eye(len(F.PLATFORMS))[pop.platform[users]]])
    return labels, appeal, np.column_stack([mean * world.item_factors[items], seen])


def request_ceilings(world: World, train_keys: list[int], eval_key: int, train_requests: int,
                     eval_requests: int = EVAL_REQUESTS, seed: int = 11) -> dict[str, float]:
    """{"appeal": AUC, "content": AUC} of the two regressions (module docstring)."""
    rng = np.random.default_rng([world.spec.seed, seed])
    per_day = max(train_requests // len(train_keys), 1)
    train = [_requests(world, key, per_day, rng) for key in train_keys]
    y, appeal, history = (np.concatenate(parts) for parts in zip(*train))
    y_eval, appeal_eval, history_eval = _requests(world, eval_key, eval_requests, rng)
    out = {}
    for name, x, x_eval in (("appeal", appeal, appeal_eval),
                            ("content", np.hstack([appeal, history]), np.hstack([appeal_eval, history_eval]))):
        model = LogisticRegression(max_iter=1000).fit(x, y)
        out[name] = float(roc_auc_score(y_eval, model.predict_proba(x_eval)[:, 1]))
    return out


def night_ceilings(world: World | DriftingWorld, eval_day: dt.date, train_days: int = 3,
                   requests_per_day: int = 4000, eval_requests: int = EVAL_REQUESTS,
                   seed: int = 11) -> dict[str, float]:
    """The ceilings of one night: a run for `eval_day` trained on the `train_days` days before it.

    {"appeal", "content"}: `request_ceilings`, each training day's requests drawn from that day's
    world (a drifting world's items, appeal, users and tastes of that day) and scored on the eval
    day's; "ceiling": the generator's, the logistic regression on the true factors of the eval
    day's users and items (pipeline/datagen/generator.py `ceiling_auc`). The regressions know the
    true appeal of each day, so no staleness caps them: the gap between a model and these is what
    the data cannot show plus what a stale model lost. For a static `World` the first two are
    `request_ceilings`'s figures for the same days."""
    from pipeline.datagen.generator import ceiling_auc

    on = world.day if isinstance(world, DriftingWorld) else (lambda key: world)
    eval_key = day_key(eval_day)
    rng = np.random.default_rng([world.spec.seed, seed])
    train = [_requests(on(key), key, requests_per_day, rng) for key in range(eval_key - train_days, eval_key)]
    y, appeal, history = (np.concatenate(parts) for parts in zip(*train))
    eval_world = on(eval_key)
    y_eval, appeal_eval, history_eval = _requests(eval_world, eval_key, eval_requests, rng)
    out = {}
    for name, x, x_eval in (("appeal", appeal, appeal_eval),
                            ("content", np.hstack([appeal, history]), np.hstack([appeal_eval, history_eval]))):
        model = LogisticRegression(max_iter=1000).fit(x, y)
        out[name] = float(roc_auc_score(y_eval, model.predict_proba(x_eval)[:, 1]))
    out["ceiling"] = ceiling_auc(eval_world, eval_key)
    return out
