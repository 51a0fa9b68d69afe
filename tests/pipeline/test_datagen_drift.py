"""The drifting world: items arrive and retire, appeal trends, users come and go, tastes move, and
any day is the same whether generated alone or in a run; the static regimes stay as they were."""
import datetime as dt
import hashlib
import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.contracts import features as F
from pipeline.datagen import generate
from pipeline.datagen.drift import DriftingWorld
from pipeline.datagen.regimes import DRIFTING, PRESETS, REGIMES, day_key, regime_spec
from pipeline.datagen.world import World, WorldSpec, with_knobs
from pipeline.paths import events_partition, items_partition

DAY = dt.date(2026, 11, 1)
TINY = dict(users=200, items=150, events_per_day=800, seed=3)
KNOBS = DRIFTING["drifting"]["drift"]


def _day(offset: int) -> dt.date:
    return DAY + dt.timedelta(days=offset)


def _world(**size) -> DriftingWorld:
    return DriftingWorld(regime_spec("drifting", **{"users": 200, "items": 150, "seed": 3, **size}))


def _bytes(root, day: dt.date) -> dict[str, bytes]:
    return {f"{kind}/{path.name}": path.read_bytes()
            for kind, folder in (("events", events_partition(root, day)), ("items", items_partition(root, day)))
            for path in sorted(folder.glob("*.parquet"))}


def _events(root, day: dt.date) -> dict:
    return pq.read_table(events_partition(root, day)).to_pydict()


def _catalog(root, day: dt.date) -> set[int]:
    return set(pq.read_table(items_partition(root, day) / "items.parquet").column(F.ITEM_ID).to_pylist())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("drifting")
    report = generate(root, DAY, 4, **TINY, regime="drifting", with_ceiling=False)
    return root, report


def test_the_preset_is_selectable_like_a_regime_but_not_in_the_benchmarks_matrix():
    spec = regime_spec("drifting", users=10, items=20)
    assert spec.drift is not None and spec.drift.item_life_days == tuple(KNOBS["item_life_days"])
    assert "drifting" in PRESETS and "drifting" not in REGIMES      # bench/quality's matrix is one night each
    assert all(regime_spec(name).drift is None for name in REGIMES)
    with pytest.raises(ValueError, match="unknown regime 'drift'.*drifting"):
        regime_spec("drift")
    with pytest.raises(ValueError, match="item_life_days"):
        with_knobs(WorldSpec(), drift={**KNOBS, "item_life_days": (5, 2)})
    with pytest.raises(ValueError, match="new_user_share with drift"):
        with_knobs(WorldSpec(), drift=KNOBS, new_user_share=0.5)


def test_same_seed_same_bytes_and_a_day_alone_is_that_day_of_a_run(run, tmp_path):
    root, report = run
    assert report.regime == "drifting" and [d.events for d in report.days] == [800] * 4
    generate(tmp_path / "again", DAY, 4, **TINY, regime="drifting", with_ceiling=False)
    generate(tmp_path / "alone", _day(2), 1, **TINY, regime="drifting", with_ceiling=False)
    generate(tmp_path / "later", _day(3), 1, **TINY, regime="drifting", with_ceiling=False)
    for offset in range(4):
        assert _bytes(tmp_path / "again", _day(offset)) == _bytes(root, _day(offset))
    assert _bytes(tmp_path / "alone", _day(2)) == _bytes(root, _day(2))
    assert _bytes(tmp_path / "later", _day(3)) == _bytes(root, _day(3))
    generate(tmp_path / "other", _day(2), 1, **{**TINY, "seed": 4}, regime="drifting", with_ceiling=False)
    assert _bytes(tmp_path / "other", _day(2)) != _bytes(root, _day(2))
    # The world of a day is a function of (spec, day): built in any order, from any first day.
    one, two = _world(), _world()
    later, earlier = one.day(day_key(_day(30))), (two.day(day_key(_day(3))), two.day(day_key(_day(30))))[1]
    assert np.array_equal(later.ids, earlier.ids) and np.array_equal(later.item_popularity, earlier.item_popularity)
    assert np.array_equal(later.returning.pools, earlier.returning.pools)
    assert np.array_equal(later.images(np.arange(5)), earlier.images(np.arange(5)))


def test_items_arrive_and_retire_every_day(run):
    root, _ = run
    seen_shown: set[int] = set()
    for offset in range(4):
        day = _day(offset)
        catalog, events = _catalog(root, day), _events(root, day)
        shown = set(events[F.ITEM_ID])
        assert shown | {h for hist in events[F.HISTORY] for h in hist} <= catalog    # every id is listed
        if offset:
            arrived = catalog - _catalog(root, _day(offset - 1))
            assert len(arrived) >= 1 and arrived.isdisjoint(seen_shown)              # ids no earlier day had
            assert shown & arrived                                                   # and shown at once
        seen_shown |= shown
    world = _world()
    key = day_key(_day(3))
    day, next_day = world.day(key), world.day(key + 1)
    alive, retired = set(day.ids[day.shown]), set(day.ids[len(day.shown):])
    tomorrow = set(next_day.ids[next_day.shown])
    assert 0 < len(alive - tomorrow) < 0.15 * len(alive) and len(tomorrow - alive) == len(alive - tomorrow)
    assert retired and retired.isdisjoint(tomorrow)                   # retired: never shown again
    assert retired.isdisjoint(set(_events(root, _day(3))[F.ITEM_ID]))
    assert day.item_exposure[len(day.shown):].sum() == 0
    # Still listed for retired_kept_days (a run reads the eval day's snapshot for its window), then gone.
    gone = alive - tomorrow
    kept = world.day(key + KNOBS["retired_kept_days"])
    after = world.day(key + KNOBS["retired_kept_days"] + 1)
    assert gone <= set(kept.ids) and gone.isdisjoint(after.ids)


def test_new_users_every_day_and_tastes_move_a_small_step(run):
    root, _ = run
    world = _world()
    key = day_key(_day(3))
    yesterday, today = world.day(key - 1), world.day(key)
    new = today.returning.ids[today.new_users]
    lo, hi = KNOBS["user_life_days"]
    assert 0.5 / hi < today.new_users.mean() < 3 / lo and len(new) >= 2
    assert set(new).isdisjoint(yesterday.returning.ids)
    earlier_events = set().union(*(_events(root, _day(o))[F.USER_ID] for o in range(3)))
    assert set(new).isdisjoint(earlier_events) and set(new) & set(_events(root, _day(3))[F.USER_ID])
    both, a, b = np.intersect1d(yesterday.returning.ids, today.returning.ids, return_indices=True)
    fa, fb = yesterday.returning.factors[a], today.returning.factors[b]
    cosine = np.sum(fa * fb, axis=1) / np.linalg.norm(fa, axis=1) / np.linalg.norm(fb, axis=1)
    assert 0.9 < cosine.mean() < 0.9999                               # a step, not a jump, not still
    week = world.day(key + 7)
    both, a, b = np.intersect1d(today.returning.ids, week.returning.ids, return_indices=True)
    fa, fb = today.returning.factors[a], week.returning.factors[b]
    assert np.mean(np.sum(fa * fb, axis=1) / np.linalg.norm(fa, axis=1) / np.linalg.norm(fb, axis=1)) < cosine.mean()


def test_appeal_trends_so_old_popularity_is_a_worse_estimate():
    world = _world(items=400)
    key = day_key(_day(20))
    today = world.day(key)

    def appeal_corr(lag: int) -> float:
        then = world.day(key - lag)
        _, a, b = np.intersect1d(today.ids[today.shown], then.ids[then.shown], return_indices=True)
        moved = today.item_popularity[a] - then.item_popularity[b]
        assert lag == 0 or np.abs(moved).max() > 0.1
        return float(np.corrcoef(today.item_popularity[a], then.item_popularity[b])[0, 1])

    assert appeal_corr(1) > 0.97 and appeal_corr(1) > appeal_corr(3) > appeal_corr(9) + 0.05


def test_fresh_popularity_beats_a_week_old_one_and_content_still_carries_signal(tmp_path):
    from sklearn.metrics import roc_auc_score

    from pipeline.contracts.popularity import ItemPopularity

    generate(tmp_path, DAY, 14, users=300, items=200, events_per_day=3000, seed=3, regime="drifting",
             with_ceiling=False)

    def window(days: list[dt.date]):
        table = pq.read_table([p for d in days for p in sorted(events_partition(tmp_path, d).glob("*.parquet"))])
        return table.column(F.ITEM_ID).to_numpy(), table.column(F.LABEL).to_numpy()

    fresh, stale = [], []
    for offset in (11, 12, 13):
        items, labels = window([_day(offset)])
        for out, lags in ((fresh, (3, 2, 1)), (stale, (10, 9, 8))):
            train = window([_day(offset - lag) for lag in lags])
            out.append(roc_auc_score(labels, ItemPopularity.fit(*train)(items)))
    assert np.mean(fresh) > np.mean(stale) + 0.02, (fresh, stale)
    # Learnable: an item's image shows its factors, so part of its appeal, from its first day: a
    # regression fitted on the older items' images predicts the items of the last three days.
    from sklearn.linear_model import Ridge

    day = _world(items=400).day(day_key(_day(20)))
    born = day.item_born[day.shown]
    new, old = day.shown[born >= day.key - 3], day.shown[born < day.key - 3]
    model = Ridge(alpha=100.0).fit(day.images(old), day.item_popularity[old])
    assert len(new) > 20 and np.corrcoef(model.predict(day.images(new)), day.item_popularity[new])[0, 1] > 0.5


def test_generate_data_cli_takes_the_drifting_preset(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pipeline", "generate-data", "--start", DAY.isoformat(),
                          "--days", "2", "--out", str(tmp_path), "--events-per-day", "400", "--users", "100",
                          "--items", "80", "--regime", "drifting"], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["regime"] == "drifting" and 0.6 < report["ceiling_auc"] < 1
    assert _catalog(tmp_path, _day(1)) - _catalog(tmp_path, DAY)


def test_night_ceilings_per_eval_day():
    from bench.lab.ceilings import night_ceilings, request_ceilings

    static = World(regime_spec("default", users=200, items=150, seed=3))
    eval_day = _day(10)
    keys = [day_key(_day(o)) for o in (7, 8, 9)]
    night = night_ceilings(static, eval_day, 3, requests_per_day=1000, eval_requests=3000)
    assert {k: night[k] for k in ("appeal", "content")} == request_ceilings(
        static, keys, day_key(eval_day), train_requests=3000, eval_requests=3000)
    world = _world()
    nights = [night_ceilings(world, _day(o), 3, requests_per_day=1000, eval_requests=3000) for o in (10, 11)]
    for n in nights:
        assert 0.55 < n["appeal"] < n["content"] < n["ceiling"] < 1, n
    assert nights[0] != nights[1]


# sha256 of the values (not the Parquet bytes, which carry the writer's version) of a tiny world per
# regime: the drifting preset must leave every static regime's data exactly as it was.
STATIC_DIGESTS = {
    "default": "1ad2e7a5b6ee58db356e37abf220e7a0fd034b7caf660e885d75f4b836d27dac",
    "cold_start": "ff68d062c9d920bcfcc06c7aa794a6f54999d3450458b79a0fadf04521d25fb5",
    "popularity": "1676dc754a9b679c4cbda117e94493dd46dc60c837ea7074f69911059cab47a8",
    "weak_content": "d2f226bad5b7e4f7649fe34170618e6b5807116eb6f65a04c0ed5c4c622a254a",
    "high_base_rate": "0d89a38ae8ce614d3657f9768ed2399ee52520285ebb716cc7c13179483cf5e4",
    "ratings_like": "facaeaa5f3b78a3a7e1580cca4f80ec558ac32fa64540bb28a0d0dc7da377d98",
}


def _values_digest(root) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.parquet")):
        digest.update(str(path.relative_to(root)).encode())
        table = pq.read_table(path)
        for name in table.schema.names:
            column = table.column(name)
            if name == F.IMAGE:
                digest.update(np.asarray(column.combine_chunks().flatten().to_numpy(), np.float32).tobytes())
            else:
                digest.update(repr(column.to_pylist()).encode())
    return digest.hexdigest()


@pytest.mark.parametrize("regime", list(REGIMES))
def test_static_regimes_are_unchanged(tmp_path, regime):
    generate(tmp_path, DAY, 2, users=100, items=80, events_per_day=300, seed=3, regime=regime, with_ceiling=False)
    assert _values_digest(tmp_path) == STATIC_DIGESTS[regime]
