"""The hidden world behind the synthetic data: user tastes, item factors, and how clicks happen.

Why a hidden-factor world: the model must have something real to learn from each input.
Clicks are driven by the dot product of a user's and an item's hidden factors; the item
factors leak into the title words and the image embedding, and the user's factors leak into
the behaviour history (users interact with items they like). A model that reads title, image
and history can therefore recover most of the signal, and the logistic regression on the true
factors (`ceiling_auc`) tells how much there is to recover.

Real data is not always that kind: the spec's regime knobs (pipeline/datagen/regimes.py names
the presets) add appeal the content cannot see, new users every day, images that carry only the
category, a high base rate. A model tuned to one world shows on the others.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pipeline.contracts import features as F

FACTORS = 16
POOL_SIZE = 64            # items a user keeps coming back to; histories are drawn from it
IMAGE_ITEMS_PER_BLOCK = 1024
CATEGORIES = (
    "shoes", "dresses", "jackets", "bags", "watches", "lamps", "chairs", "mugs",
    "phones", "headphones", "toys", "books",
)
_WORD_STEMS = (
    "red blue green black white grey navy beige pink gold silver leather cotton wool linen "
    "denim suede canvas steel oak walnut ceramic glass vintage classic modern slim relaxed "
    "oversized cropped padded quilted waterproof wireless portable compact deluxe premium "
    "organic recycled handmade soft warm light heavy striped floral plaid dotted matte glossy "
    "summer winter autumn spring urban outdoor travel sport office kids retro minimal bold"
).split()
PLATFORM_SHARES = (0.45, 0.35, 0.20)
IMAGE_CONTENTS = ("factors", "category")


@dataclass(frozen=True)
class WorldSpec:
    users: int = 2000
    items: int = 1000
    ctr: float = 0.12
    seed: int = 7
    taste_strength: float = 2.5   # how strongly user x item factors drive clicks
    appeal_strength: float = 1.0  # how strongly an item's own (visible) appeal drives clicks
    hidden_appeal: float = 0.3    # spread of the appeal its content does not show (only its clicks do)
    new_user_share: float = 0.0   # share of each day's impressions from users new that day
    image_content: str = "factors"  # "category": images carry only the item's category plus noise
    drift: DriftSpec | None = None  # a world that moves day by day (pipeline/datagen/drift.py); None: it does not


@dataclass(frozen=True)
class DriftSpec:
    """How a drifting world moves (pipeline/datagen/drift.py; the `drifting` preset's magnitudes are
    in pipeline/datagen/regimes.py). Each catalog slot holds one item at a time: it lives a whole
    number of days drawn once per slot from `item_life_days`, then a new item (a new id, new
    factors) takes the slot; users come and go the same way over `user_life_days`."""

    item_life_days: tuple[int, int]   # (shortest, longest) life of an item, in days
    retired_kept_days: int            # a retired item stays in the snapshot (never shown) this many days
    appeal_trend: float               # sd of the part of an item's appeal that trends up and down
    appeal_period_days: int           # days between the trend's turning points
    user_life_days: tuple[int, int]   # (shortest, longest) days a user keeps coming back
    taste_drift: float                # share of a user's taste (variance) that moves
    taste_period_days: int            # days between the moving part's turning points


@dataclass(frozen=True)
class Population:
    """The users of one day, by index: the world's returning users, then that day's new ones."""

    factors: np.ndarray
    pools: np.ndarray       # each user's favourite items, histories and half the impressions come from them
    platform: np.ndarray
    activity: np.ndarray    # probability that an impression is the user's
    ids: np.ndarray         # user_id in the data


class World:
    """Deterministic for a spec: the same seed gives the same users, items and click model."""

    def __init__(self, spec: WorldSpec):
        self.spec = spec
        rng = np.random.default_rng([spec.seed, 0])
        self.user_factors = rng.normal(size=(spec.users, FACTORS)).astype(np.float32) / np.sqrt(FACTORS)
        self.item_factors = rng.normal(size=(spec.items, FACTORS)).astype(np.float32)
        # Appeal is partly visible in the item's factors (so in its image and title): some items
        # just look more clickable. It gives small models a main effect to learn first.
        appeal_direction = rng.normal(size=FACTORS).astype(np.float32) / np.sqrt(FACTORS)
        self.item_popularity = (spec.appeal_strength * (self.item_factors @ appeal_direction)
                                + rng.normal(0.0, 1.0, size=spec.items) * spec.hidden_appeal).astype(np.float32)
        self.user_platform = rng.choice(len(F.PLATFORMS), size=spec.users, p=PLATFORM_SHARES)
        self.user_activity = rng.pareto(2.0, size=spec.users) + 1.0
        self.user_activity /= self.user_activity.sum()
        self.item_exposure = np.exp(self.item_popularity * 2)
        self.item_exposure /= self.item_exposure.sum()
        self.platform_bias = np.array([0.1, 0.0, -0.15], dtype=np.float32)
        self.word_directions = rng.normal(size=(len(_WORD_STEMS) * 4, FACTORS)).astype(np.float32)
        self.image_projection = rng.normal(size=(FACTORS, F.IMAGE_DIM)).astype(np.float32) / np.sqrt(FACTORS)
        self.user_pools = self._taste_pools(rng, self.user_factors)
        self.category_projection = np.random.default_rng([spec.seed, 8]).normal(
            size=(len(CATEGORIES), F.IMAGE_DIM)).astype(np.float32)     # its own stream: the default world is unchanged
        self.returning = Population(self.user_factors, self.user_pools, self.user_platform, self.user_activity,
                                    np.arange(1, spec.users + 1, dtype=np.int64))
        self.bias = self._calibrate_bias(rng)

    def population(self, day_key: int) -> Population:
        """Day `day_key`'s users: the returning ones and, with `new_user_share`, as many new users
        (ids above every earlier day's) whose factors, pools and histories follow the same rules."""
        share = self.spec.new_user_share
        if share <= 0:
            return self.returning
        n = self.spec.users
        rng = np.random.default_rng([self.spec.seed, 7, day_key])
        factors = rng.normal(size=(n, FACTORS)).astype(np.float32) / np.sqrt(FACTORS)
        base = self.returning
        return Population(
            np.vstack([base.factors, factors]), np.vstack([base.pools, self._taste_pools(rng, factors)]),
            np.concatenate([base.platform, rng.choice(len(F.PLATFORMS), size=n, p=PLATFORM_SHARES)]),
            np.concatenate([base.activity * (1 - share), np.full(n, share / n)]),
            np.concatenate([base.ids, n + 1 + day_key * n + np.arange(n, dtype=np.int64)]))

    # --- ids: item ids start at 1 so that 0 can mean "no item" (padding) everywhere --------
    def item_ids(self, index: np.ndarray) -> np.ndarray:
        return index.astype(np.int64) + 1

    def click_logit(self, pop: Population, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        affinity = np.einsum("ij,ij->i", pop.factors[users], self.item_factors[items])
        return (self.bias + self.spec.taste_strength * affinity + self.item_popularity[items]
                + self.platform_bias[pop.platform[users]])

    def sample_impressions(self, rng: np.random.Generator, n: int,
                           pop: Population | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(user index in `pop`, item index): half from the user's taste pool, half from popular items."""
        pop = pop or self.returning
        users = rng.choice(len(pop.ids), size=n, p=pop.activity)
        from_pool = rng.random(n) < 0.5
        pooled = pop.pools[users, rng.integers(0, POOL_SIZE, size=n)]
        popular = rng.choice(self.spec.items, size=n, p=self.item_exposure)
        return users, np.where(from_pool, pooled, popular)

    def sample_histories(
        self, rng: np.random.Generator, pop: Population, users: np.ndarray, max_len: int = F.MAX_HISTORY
    ) -> tuple[np.ndarray, np.ndarray]:
        """Variable-length histories from each user's pool: (offsets, item indices)."""
        lengths = np.minimum(rng.geometric(1 / 20, size=len(users)) - 1, max_len)
        offsets = np.zeros(len(users) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        owners = np.repeat(users, lengths)
        values = pop.pools[owners, rng.integers(0, POOL_SIZE, size=len(owners))]
        return offsets, values

    def titles(self, items: np.ndarray, rng: np.random.Generator) -> list[str]:
        """Titles whose words lean towards an item's factors: the text carries the signal."""
        words = [f"{stem}{suffix}" for stem in _WORD_STEMS for suffix in ("", "s", "ish", "x")]
        scores = self.item_factors[items] @ self.word_directions.T
        gumbel = -np.log(-np.log(rng.random(scores.shape)))
        top = np.argsort(-(scores + 1.5 * gumbel), axis=1)[:, :6]
        cats = self.categories(items)
        return [
            f"{' '.join(words[w] for w in row[:n])} {cat[:-1]} #{item + 1}".capitalize()
            for row, n, cat, item in zip(top, 3 + items % 4, cats, items)
        ]

    def categories(self, items: np.ndarray) -> list[str]:
        return [CATEGORIES[c] for c in np.argmax(self.item_factors[items, : len(CATEGORIES)], axis=1)]

    def images(self, items: np.ndarray) -> np.ndarray:
        """A CNN-like pooled output: non-negative, sparse-ish, driven by the item factors (or, with
        `image_content: category`, by the item's category only)."""
        if self.spec.image_content == "category":
            codes = np.argmax(self.item_factors[items, : len(CATEGORIES)], axis=1)
            signal = self.category_projection[codes]
        else:
            signal = self.item_factors[items] @ self.image_projection
        out = np.empty((len(items), F.IMAGE_DIM), dtype=np.float32)
        for block in np.unique(items // IMAGE_ITEMS_PER_BLOCK):
            mask = items // IMAGE_ITEMS_PER_BLOCK == block
            noise_rng = np.random.default_rng([self.spec.seed, 2, int(block)])
            noise = noise_rng.normal(0, 0.5, size=(IMAGE_ITEMS_PER_BLOCK, F.IMAGE_DIM)).astype(np.float32)
            local = items[mask] % IMAGE_ITEMS_PER_BLOCK
            out[mask] = np.maximum(signal[mask] + noise[local], 0)
        return out

    def _taste_pools(self, rng: np.random.Generator, user_factors: np.ndarray) -> np.ndarray:
        """Each user's POOL_SIZE favourite items among random candidates (scales to big catalogs)."""
        candidates_n = min(self.spec.items, 512)
        pools = np.empty((len(user_factors), POOL_SIZE), dtype=np.int64)
        for start in range(0, len(user_factors), 4096):
            users = np.arange(start, min(start + 4096, len(user_factors)))
            cands = rng.integers(0, self.spec.items, size=(len(users), candidates_n))
            if self.spec.items <= 50_000:   # one matmul beats gathering 512 factor rows per user
                scores = np.take_along_axis(user_factors[users] @ self.item_factors.T, cands, axis=1)
            else:
                scores = np.einsum("uf,ucf->uc", user_factors[users], self.item_factors[cands])
            scores += rng.gumbel(size=scores.shape) * 0.5
            best = np.argpartition(-scores, POOL_SIZE - 1, axis=1)[:, :POOL_SIZE]
            picked = np.take_along_axis(cands, best, axis=1)
            if picked.shape[1] < POOL_SIZE:
                picked = np.resize(picked, (len(users), POOL_SIZE))
            pools[users] = picked
        return pools

    def _calibrate_bias(self, rng: np.random.Generator) -> float:
        """Bisect the global bias so the mean click probability equals the configured CTR."""
        self.bias = 0.0
        pop = self.population(0)
        users, items = self.sample_impressions(rng, 20_000, pop)
        return bias_for_ctr(self.click_logit(pop, users, items), self.spec.ctr)

    def ceiling_features(self, pop: Population, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """What a logistic regression on the true hidden factors sees."""
        return np.column_stack([pop.factors[users] * self.item_factors[items], self.item_popularity[items],
                                np.eye(len(F.PLATFORMS))[pop.platform[users]]])


def with_knobs(spec: WorldSpec, **knobs) -> WorldSpec:
    """`spec` with regime knobs set (checked: an unknown knob or image content is an error)."""
    out = replace(spec, **knobs)
    if out.image_content not in IMAGE_CONTENTS:
        raise ValueError(f"image_content {out.image_content!r}: expected one of {IMAGE_CONTENTS}")
    if not 0 <= out.new_user_share < 1:
        raise ValueError(f"new_user_share {out.new_user_share}: expected a share in [0, 1)")
    if isinstance(out.drift, dict):
        out = replace(out, drift=_drift_spec(out.drift))
    if out.drift is not None and out.new_user_share > 0:
        raise ValueError("new_user_share with drift: a drifting world brings its own new users (user_life_days)")
    return out


def _drift_spec(knobs: dict) -> DriftSpec:
    """The DriftSpec of `knobs`, checked (an unknown or missing knob is a TypeError, as for WorldSpec)."""
    drift = DriftSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in knobs.items()})
    for name in ("item_life_days", "user_life_days"):
        lo, hi = getattr(drift, name)
        if not 1 <= lo <= hi:
            raise ValueError(f"drift {name} {(lo, hi)}: expected (shortest, longest) days, 1 <= shortest <= longest")
    if drift.retired_kept_days < 0 or drift.appeal_trend < 0:
        raise ValueError("drift retired_kept_days and appeal_trend: expected values >= 0")
    if drift.appeal_period_days < 1 or drift.taste_period_days < 1:
        raise ValueError("drift appeal_period_days and taste_period_days: expected ints >= 1 (days)")
    if not 0 <= drift.taste_drift <= 1:
        raise ValueError(f"drift taste_drift {drift.taste_drift}: expected a share in [0, 1]")
    return drift


def bias_for_ctr(logits: np.ndarray, ctr: float) -> float:
    """The bias that makes the mean click probability of `logits` equal `ctr` (bisection)."""
    lo, hi = -20.0, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if np.mean(1 / (1 + np.exp(-(logits + mid)))) > ctr:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2
