"""The rules that turn a ratings log into contract rows (ratings_import.py says what each column
holds and why): labels, histories, event ids, the genres' stand-in image, the items' rows."""
from __future__ import annotations

import functools
import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.contracts import features as F
from pipeline.datagen.ratings_read import Items, Ratings

NO_GENRE = "(no genre)"
IMAGE_NONZEROS = 64              # dims each genre sets to +-1 (of F.IMAGE_DIM)
PROJECTION_KEY = b"reco-nightly/genre-image/v1:"
_US = 1_000_000
_DAY_US = 86_400 * _US


def parse_genres(genres: str | None) -> list[str]:
    """'Crime|Drama' -> ['Crime', 'Drama']: trimmed, empty parts and repeats dropped, order kept."""
    return list(dict.fromkeys(g.strip() for g in (genres or "").split("|") if g.strip()))


def category(genres: str | None) -> str:
    """The first listed genre, or NO_GENRE."""
    return (parse_genres(genres) or [NO_GENRE])[0]


@functools.lru_cache(maxsize=4096)
def genre_vector(genre: str) -> np.ndarray:
    """One genre's fixed vector: +-1 on IMAGE_NONZEROS dims, 0 elsewhere, positions and signs drawn
    from SHAKE-256 of the genre's name (no RNG: the same on every machine and numpy version). A sparse
    random projection (Achlioptas; Li, Hastie & Church): distinct genres are near-orthogonal."""
    stream = hashlib.shake_256(PROJECTION_KEY + genre.encode("utf-8")).digest(4 * F.IMAGE_DIM + IMAGE_NONZEROS)
    keys = np.frombuffer(stream[:4 * F.IMAGE_DIM], dtype="<u4")
    dims = np.argsort(keys, kind="stable")[:IMAGE_NONZEROS]
    signs = np.where(np.frombuffer(stream[4 * F.IMAGE_DIM:], dtype=np.uint8) & 1, 1.0, -1.0)
    vector = np.zeros(F.IMAGE_DIM, np.float32)
    vector[dims] = signs
    vector.setflags(write=False)
    return vector


def genre_image(genres: str | None) -> np.ndarray:
    """The stand-in image of an item: the sum of its distinct genres' vectors over sqrt(their number)
    (NO_GENRE's vector when it has none). It depends on the set of genres only, not their order."""
    names = sorted(parse_genres(genres)) or [NO_GENRE]
    return (np.sum([genre_vector(g) for g in names], axis=0) / np.sqrt(len(names))).astype(np.float32)


def labels(rating: np.ndarray, positive_min: float) -> np.ndarray:
    return (rating >= positive_min).astype(np.int64)


def histories(user: np.ndarray, item: np.ndarray, ts_us: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, offsets, values): rows sorted by (user, time, item) = `order`; row k's history is
    values[offsets[k]:offsets[k + 1]], the user's items of strictly earlier times, most recent last,
    at most F.MAX_HISTORY. Vectorised: each history is a slice of the sorted item column."""
    order = np.lexsort((item, ts_us, user))
    u, t = user[order], ts_us[order]
    n = len(order)
    rows = np.arange(n)
    new_user = np.r_[True, u[1:] != u[:-1]] if n else np.zeros(0, bool)
    new_time = new_user | np.r_[True, t[1:] != t[:-1]] if n else np.zeros(0, bool)
    user_first = np.maximum.accumulate(np.where(new_user, rows, 0))
    time_first = np.maximum.accumulate(np.where(new_time, rows, 0))      # first row of the same (user, time)
    length = np.minimum(time_first - user_first, F.MAX_HISTORY)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(length, out=offsets[1:])
    gather = np.repeat(time_first - length - offsets[:-1], length) + np.arange(offsets[-1])
    return order, offsets, item[order][gather]


def _event_ids(ts: pa.Array, user: np.ndarray, item: np.ndarray, ts_us: np.ndarray) -> pa.Array:
    seconds, micros = np.divmod(ts_us, _US)
    second_text = pc.cast(pa.array(seconds), pa.string())
    if micros.any():
        fraction = pc.binary_join_element_wise(".", pc.utf8_lpad(pc.cast(pa.array(micros), pa.string()), 6, "0"), "")
        second_text = pc.if_else(pa.array(micros != 0), pc.binary_join_element_wise(second_text, fraction, ""),
                                 second_text)
    return pc.binary_join_element_wise(pc.strftime(ts, format="%Y%m%d"), pc.cast(pa.array(user), pa.string()),
                                       pc.cast(pa.array(item), pa.string()), second_text, "-")


def events_table(ratings: Ratings, positive_min: float) -> tuple[pa.Table, np.ndarray]:
    """Every rating as a contract event, sorted by (time, user, item), and each row's UTC day number."""
    order, offsets, values = histories(ratings.user, ratings.item, ratings.ts_us)
    # 64-bit offsets (a big log's histories may pass 2**31 ids); each day is cast to the contract's list.
    history = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int64()))
    user, item, ts_us = ratings.user[order], ratings.item[order], ratings.ts_us[order]
    by_time = np.lexsort((item, user, ts_us))
    user, item, ts_us = user[by_time], item[by_time], ts_us[by_time]
    ts = pa.array(ts_us, pa.timestamp("us", tz="UTC"))
    platform = (pa.nulls(len(ts_us), pa.string()) if ratings.platform is None
                else ratings.platform.take(pa.array(order[by_time])))
    table = pa.table({
        F.EVENT_ID: _event_ids(ts, user, item, ts_us),
        F.EVENT_TS: ts,
        F.USER_ID: pa.array(user),
        F.ITEM_ID: pa.array(item),
        F.HISTORY: history.take(pa.array(by_time)),
        F.PLATFORM: platform,
        F.HOUR: pa.array((np.mod(ts_us, _DAY_US) // (3600 * _US)).astype(np.int32)),
        F.LABEL: pa.array(labels(ratings.rating[order][by_time], positive_min)),
    })
    return table, np.floor_divide(ts_us, _DAY_US)


def catalog_table(items: Items, first_day: np.ndarray) -> pa.Table:
    """The item file as contract rows, ordered by the UTC day each item was first rated (never rated:
    first), then id: the snapshot of day D is a prefix of it."""
    order = np.lexsort((items.item_id, first_day))
    genres = pc.fill_null(items.genres.take(pa.array(order)), "")
    distinct, codes = np.unique(np.array(genres.to_pylist(), dtype=object).astype(str), return_inverse=True)
    images = np.stack([genre_image(g) for g in distinct.tolist()]) if len(distinct) else \
        np.zeros((0, F.IMAGE_DIM), np.float32)
    flat = np.take(images, codes.reshape(-1), axis=0).reshape(-1)
    n = len(order)
    return pa.table({
        F.ITEM_ID: pa.array(items.item_id[order]),
        F.TITLE: items.title.take(pa.array(order)),
        F.CATEGORY: pa.array(np.array([category(g) for g in distinct.tolist()], dtype=object)[codes.reshape(-1)]
                             .tolist() if n else [], pa.string()),
        F.PRICE: pa.nulls(n, pa.float64()) if items.price is None else items.price.take(pa.array(order)),
        F.IMAGE: pa.ListArray.from_arrays(pa.array(np.arange(0, n * F.IMAGE_DIM + 1, F.IMAGE_DIM, dtype=np.int32)),
                                          pa.array(flat, pa.float32())),
    })


def repeats(ratings: Ratings) -> np.ndarray:
    """Rows whose (user, item, time) an earlier row of the log already has: an export's duplicate,
    which would repeat an event id and count twice in later histories."""
    order = np.lexsort((np.arange(len(ratings.user)), ratings.ts_us, ratings.item, ratings.user))
    u, i, t = ratings.user[order], ratings.item[order], ratings.ts_us[order]
    same = (u[1:] == u[:-1]) & (i[1:] == i[:-1]) & (t[1:] == t[:-1])
    repeated = np.zeros(len(order), bool)
    repeated[order[1:][same]] = True
    return repeated
