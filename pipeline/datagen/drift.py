"""A world that drifts: items arrive and retire every day, their appeal trends, users come and go, tastes move.

The default world stands still (the same users every day, fixed tastes and appeal), so a model
trained a week ago scores as well as tonight's. In a drifting world (`WorldSpec.drift`, the
`drifting` preset of pipeline/datagen/regimes.py) fresh training is worth something:

- The catalog has `items` slots. A slot holds one item at a time for a life drawn once per slot
  from `item_life_days`, at a phase of its own, then a new item (a new id, new factors, so a new
  title and image) takes it: every day a few percent of the items are new and as many retire. A
  retired item is never shown again but stays in the snapshot for `retired_kept_days`, as
  catalogs keep delisted items a while (a run reads the eval day's snapshot for its whole window).
- An item's appeal is the default world's (visible in its content, plus a hidden part) plus a
  trend of sd `appeal_trend` that moves between random levels, one every `appeal_period_days`:
  yesterday's popularity is a biased estimate of today's, a week-old one more so.
- Users come and go the same way as items (`user_life_days`): a user new today has an id no
  earlier day has. A user's taste is sqrt(1 - w) x a fixed part + sqrt(w) x a part that moves
  between random levels every `taste_period_days` (w = `taste_drift`), a small step a day.

Everything of day D is a pure function of (spec, D): slot lives and phases are drawn once per
world; an item or user is drawn from its own seed (slot, generation); trends interpolate between
levels drawn from that seed (cos/sin weights, so the variance is the same on every day), and
the per-user noise that picks favourite items is a hash of (seed, user id, item id). Day D
generated alone is byte for byte day D of a longer run, and nothing is stepped from day 0.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pipeline.contracts import features as F
from pipeline.datagen.world import (
    _WORD_STEMS,
    CATEGORIES,
    FACTORS,
    PLATFORM_SHARES,
    POOL_SIZE,
    DriftSpec,
    Population,
    World,
    WorldSpec,
    bias_for_ctr,
)

ID_GENERATIONS = 256       # a slot's item ids come back after this many of its items (>= 256 x its life: years)
POOL_CANDIDATES = 512      # favourites are a user's best of about this many alive items, as in the default world
_POOL_BLOCK = 1 << 22      # user x item scores computed at once while choosing favourites
CALIBRATION_KEYS = (0, 37, 74, 111)   # days the click bias is fitted on (the world is stationary; a day's
#                                       few most appealing items move its rate, so several)
_ITEM, _USER, _IMAGE, _CONSTANTS, _ITEM_SLOTS, _USER_SLOTS, _BIAS, _POOL, _PICK = range(21, 30)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays: a well-spread hash (wraps mod 2^64, as intended)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _pair_uniform(seed: int, tag: int, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """[len(users), len(items)] uniforms in (0, 1), each a function of (seed, tag, user id, item id) only."""
    salt = _mix(np.array([seed * 1_000_003 + tag], dtype=np.uint64))
    h = _mix(_mix(users.astype(np.uint64) ^ salt)[:, None] ^ items.astype(np.uint64)[None, :])
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def _level(anchors: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Between anchors k and k + 1 at `position` = k + t: cos(pi t / 2) A_k + sin(pi t / 2) A_k+1,
    as variable as one anchor on every day (a straight line between them would sag mid-way)."""
    k = np.floor(position).astype(np.int64)
    t = (position - k)[..., None] if anchors.ndim == 3 else position - k
    rows = np.arange(len(k))
    return np.cos(np.pi * t / 2) * anchors[rows, k] + np.sin(np.pi * t / 2) * anchors[rows, k + 1]


@dataclass(frozen=True)
class _Slots:
    """Slots whose occupants live `life` days each, one after the other, shifted by `phase`."""

    life: np.ndarray
    phase: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, n: int, days: tuple[int, int]) -> _Slots:
        life = rng.integers(days[0], days[1] + 1, size=n)
        return cls(life, rng.integers(0, life))

    def generation(self, key: int) -> np.ndarray:
        return (key + self.phase) // self.life

    def born(self, slots: np.ndarray, generation: np.ndarray) -> np.ndarray:
        """The first day of occupant `generation` of each of `slots`."""
        return generation * self.life[slots] - self.phase[slots]


@dataclass(frozen=True)
class _Item:
    factors: np.ndarray
    hidden: float
    anchors: np.ndarray     # trend levels, one every appeal_period_days from its first day
    offset: float           # where in the first period it starts
    price: float
    title_noise: np.ndarray


@dataclass(frozen=True)
class _User:
    factors: np.ndarray
    anchors: np.ndarray     # [levels, FACTORS] of the moving part
    offset: float
    platform: int
    activity: float


class DriftingWorld:
    """The timeline of a drifting world: `day(key)` is day `key`'s world (a `World`)."""

    def __init__(self, spec: WorldSpec):
        if spec.drift is None:
            raise ValueError("DriftingWorld needs a spec with drift (WorldSpec.drift)")
        self.spec = spec
        drift: DriftSpec = spec.drift
        rng = np.random.default_rng([spec.seed, _CONSTANTS])
        self.appeal_direction = rng.normal(size=FACTORS).astype(np.float32) / np.sqrt(FACTORS)
        self.word_directions = rng.normal(size=(len(_WORD_STEMS) * 4, FACTORS)).astype(np.float32)
        self.image_projection = rng.normal(size=(FACTORS, F.IMAGE_DIM)).astype(np.float32) / np.sqrt(FACTORS)
        self.category_projection = rng.normal(size=(len(CATEGORIES), F.IMAGE_DIM)).astype(np.float32)
        self.platform_bias = np.array([0.1, 0.0, -0.15], dtype=np.float32)
        self.item_slots = _Slots.draw(np.random.default_rng([spec.seed, _ITEM_SLOTS]), spec.items,
                                      drift.item_life_days)
        self.user_slots = _Slots.draw(np.random.default_rng([spec.seed, _USER_SLOTS]), spec.users,
                                      drift.user_life_days)
        self._item_levels = (drift.item_life_days[1] - 1) // drift.appeal_period_days + 3
        self._user_levels = (drift.user_life_days[1] - 1) // drift.taste_period_days + 3
        self._items: dict[tuple[int, int], _Item] = {}
        self._users: dict[tuple[int, int], _User] = {}
        self.bias = 0.0
        self.bias = self._calibrate_bias()

    # --- the occupants, each from its own seed -----------------------------------------------
    def _item(self, slot: int, generation: int) -> _Item:
        found = self._items.get((slot, generation))
        if found is None:
            rng = np.random.default_rng([self.spec.seed, _ITEM, slot, generation])
            found = _Item(rng.normal(size=FACTORS).astype(np.float32), float(rng.normal()),
                          rng.normal(size=self._item_levels), float(rng.random()),
                          float(np.round(np.exp(rng.normal(3.0, 0.8)), 2)),
                          -np.log(-np.log(rng.random(len(self.word_directions)))))
            self._items[slot, generation] = found
        return found

    def _user(self, slot: int, generation: int) -> _User:
        found = self._users.get((slot, generation))
        if found is None:
            rng = np.random.default_rng([self.spec.seed, _USER, slot, generation])
            found = _User(rng.normal(size=FACTORS).astype(np.float32) / np.sqrt(FACTORS),
                          rng.normal(size=(self._user_levels, FACTORS)) / np.sqrt(FACTORS), float(rng.random()),
                          int(rng.choice(len(F.PLATFORMS), p=PLATFORM_SHARES)), float(rng.pareto(2.0) + 1.0))
            self._users[slot, generation] = found
        return found

    def item_id(self, slot: np.ndarray, generation: np.ndarray) -> np.ndarray:
        return 1 + slot + self.spec.items * (generation % ID_GENERATIONS)

    def user_id(self, slot: np.ndarray, generation: np.ndarray) -> np.ndarray:
        return 1 + slot + self.spec.users * generation

    # --- one day ------------------------------------------------------------------------------
    def day(self, key: int) -> DriftDay:
        """Day `key`'s world: its catalog (the items alive that day, then the retired ones still
        listed), their appeal that day, that day's users with their tastes and favourites."""
        if key < 0:
            raise ValueError(f"day key {key}: a drifting world starts on 1970-01-01 (key 0)")
        return DriftDay(self, key)

    def _catalog(self, key: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(slots, generations, how many are alive): the alive items first, slot by slot."""
        slots = np.arange(self.spec.items)
        generation = self.item_slots.generation(key)
        parts = [(slots, generation)]
        for back in range(1, self.spec.drift.retired_kept_days + 1):
            earlier = generation - back
            retired_on = self.item_slots.born(slots, earlier + 1)        # the day the next one took the slot
            listed = (earlier >= 0) & (key - retired_on < self.spec.drift.retired_kept_days)
            if not listed.any():
                break
            parts.append((slots[listed], earlier[listed]))
        return (np.concatenate([s for s, _ in parts]), np.concatenate([g for _, g in parts]), self.spec.items)

    def _calibrate_bias(self) -> float:
        """Bisect the global bias so that the mean click probability is the configured CTR."""
        rng = np.random.default_rng([self.spec.seed, _BIAS])
        logits = []
        for key in CALIBRATION_KEYS:
            day = self.day(key)
            users, items = day.sample_impressions(rng, 20_000 // len(CALIBRATION_KEYS))
            logits.append(day.click_logit(day.returning, users, items))
        return bias_for_ctr(np.concatenate(logits), self.spec.ctr)


class DriftDay(World):
    """One day of a DriftingWorld, with the interface of `World` (the generator and the ceilings
    use it as they use a static world): item indices are rows of the day's catalog, `item_ids`
    maps them to ids, `shown` are the rows the day may show (the alive items)."""

    def __init__(self, timeline: DriftingWorld, key: int):       # not World.__init__: the arrays are the day's
        spec, drift = timeline.spec, timeline.spec.drift
        self.timeline, self.key = timeline, key
        self.slots, self.generations, alive = timeline._catalog(key)
        items = [timeline._item(int(s), int(g)) for s, g in zip(self.slots, self.generations)]
        self.spec = replace(spec, items=len(items))
        self.ids = timeline.item_id(self.slots, self.generations).astype(np.int64)
        self.shown = np.arange(alive)
        self.item_born = timeline.item_slots.born(self.slots, self.generations)
        self.item_factors = np.stack([it.factors for it in items])
        age = np.minimum(key - self.item_born, timeline.item_slots.life[self.slots] - 1)   # retired: frozen
        trend = _level(np.stack([it.anchors for it in items]),
                       age / drift.appeal_period_days + np.array([it.offset for it in items]))
        self.item_popularity = (spec.appeal_strength * (self.item_factors @ timeline.appeal_direction)
                                + spec.hidden_appeal * np.array([it.hidden for it in items])
                                + drift.appeal_trend * trend).astype(np.float32)
        exposure = np.zeros(len(items))
        exposure[:alive] = np.exp(self.item_popularity[:alive] * 2)
        self.item_exposure = exposure / exposure.sum()
        self.prices = np.array([it.price for it in items])
        self._title_noise = np.stack([it.title_noise for it in items])
        self.platform_bias = timeline.platform_bias
        self.word_directions = timeline.word_directions
        self.image_projection = timeline.image_projection
        self.category_projection = timeline.category_projection
        self.returning = self._population(timeline, key)
        self.bias = timeline.bias

    def _population(self, timeline: DriftingWorld, key: int) -> Population:
        slots = np.arange(timeline.spec.users)
        generation = timeline.user_slots.generation(key)
        users = [timeline._user(int(s), int(g)) for s, g in zip(slots, generation)]
        self.user_born = timeline.user_slots.born(slots, generation)
        w = timeline.spec.drift.taste_drift
        moving = _level(np.stack([u.anchors for u in users]),
                        (key - self.user_born) / timeline.spec.drift.taste_period_days
                        + np.array([u.offset for u in users]))
        factors = (np.sqrt(1 - w) * np.stack([u.factors for u in users]) + np.sqrt(w) * moving).astype(np.float32)
        ids = timeline.user_id(slots, generation).astype(np.int64)
        activity = np.array([u.activity for u in users])
        return Population(factors, self._favourites(factors, ids), np.array([u.platform for u in users]),
                          activity / activity.sum(), ids)

    def _favourites(self, factors: np.ndarray, user_ids: np.ndarray) -> np.ndarray:
        """Each user's POOL_SIZE favourites among the alive items: the best of a candidate set (an
        item is a candidate of a user with probability POOL_CANDIDATES / alive, by hash) by taste
        plus Gumbel noise of sd-scale 0.5, as the default world's pools. Both hashes are of (user,
        item) ids, so favourites change only as tastes move and items come and go."""
        alive = self.item_factors[self.shown]
        ids = self.ids[self.shown]
        keep = min(POOL_SIZE, len(ids))
        share = min(1.0, POOL_CANDIDATES / len(ids))
        seed = self.timeline.spec.seed
        pools = np.empty((len(factors), POOL_SIZE), dtype=np.int64)
        block = max(1, _POOL_BLOCK // len(ids))
        for start in range(0, len(factors), block):
            rows = slice(start, start + block)
            scores = factors[rows] @ alive.T + 0.5 * -np.log(-np.log(_pair_uniform(seed, _POOL, user_ids[rows], ids)))
            scores[_pair_uniform(seed, _PICK, user_ids[rows], ids) >= share] = -1e9
            best = np.argpartition(-scores, keep - 1, axis=1)[:, :keep]
            pools[rows] = np.resize(best, (len(best), POOL_SIZE)) if keep < POOL_SIZE else best
        return self.shown[pools]

    def population(self, day_key: int | None = None) -> Population:
        if day_key is not None and day_key != self.key:
            raise ValueError(f"day {self.key}'s world asked for day {day_key}'s users: use DriftingWorld.day")
        return self.returning

    @property
    def new_users(self) -> np.ndarray:
        """Whether each of the day's users arrived that day."""
        return self.user_born == self.key

    def item_ids(self, index: np.ndarray) -> np.ndarray:
        return self.ids[index]

    def titles(self, items: np.ndarray, rng: np.random.Generator | None = None) -> list[str]:
        """The default world's titles, with each item's own noise (the same title every day)."""
        words = [f"{stem}{suffix}" for stem in _WORD_STEMS for suffix in ("", "s", "ish", "x")]
        scores = self.item_factors[items] @ self.word_directions.T
        top = np.argsort(-(scores + 1.5 * self._title_noise[items]), axis=1)[:, :6]
        return [f"{' '.join(words[w] for w in row[:n])} {cat[:-1]} #{item_id}".capitalize()
                for row, n, cat, item_id in zip(top, 3 + self.ids[items] % 4, self.categories(items), self.ids[items])]

    def images(self, items: np.ndarray) -> np.ndarray:
        """As the default world's, with each item's own noise (the same image every day)."""
        if self.spec.image_content == "category":
            signal = self.category_projection[np.argmax(self.item_factors[items, : len(CATEGORIES)], axis=1)]
        else:
            signal = self.item_factors[items] @ self.image_projection
        seed = self.timeline.spec.seed
        noise = np.stack([np.random.default_rng([seed, _IMAGE, int(self.slots[i]), int(self.generations[i])])
                          .normal(0, 0.5, size=F.IMAGE_DIM).astype(np.float32) for i in items]) if len(items) \
            else np.zeros((0, F.IMAGE_DIM), np.float32)
        return np.maximum(signal + noise, 0)
