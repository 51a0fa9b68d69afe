"""tf.Example bytes built by concatenation, and a stable vectorized event hash.

An example holds only int64 ids (items by reference: pipeline/contracts/item_table.py). Protobuf
wire format lets a whole batch be encoded column by column: an Example is field 1 (Features,
length-delimited) and Features is a repeated field 1 of map entries, so map entries serialized
separately and concatenated form a valid Features message; the varints of a column are encoded
vectorized over the batch.

Why not tfx_bsl's C++ `RecordBatchToExamplesEncoder`: it is faster (`python -m bench encoder`),
but its bytes are not deterministic (Features is a protobuf map, serialized in hash order: one
row encodes differently from call to call), so a rerun would write different shards for the same
examples. Here the features are always in spec order and a rerun's shards are byte-identical.

Repeated numeric fields are written packed, as proto3 does for tf.train.Int64List/FloatList.
"""
from __future__ import annotations

import numpy as np

_LEN = 2                        # wire type of length-delimited fields
_ENTRY_TAG = bytes([1 << 3 | _LEN])        # Features.feature map entry / Example.features
_KEY_TAG = bytes([1 << 3 | _LEN])          # map entry key
_VALUE_TAG = bytes([2 << 3 | _LEN])        # map entry value (Feature)
_INT64_LIST_TAG = bytes([3 << 3 | _LEN])   # Feature.int64_list
_PACKED_TAG = bytes([1 << 3 | _LEN])       # Int64List.value, packed
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


def _entry(key: str, feature: bytes) -> bytes:
    """One serialized Features map entry {key: feature}, including its own field tag."""
    body = _delimited(_KEY_TAG, key.encode()) + _delimited(_VALUE_TAG, feature)
    return _delimited(_ENTRY_TAG, body)


def int64_entry_prefix(key: str, payload_len: int) -> bytes:
    """Everything of an {key: Int64List} map entry that precedes its `payload_len` varint bytes."""
    list_len = 1 + len(varint(payload_len)) + payload_len
    feature_len = 1 + len(varint(list_len)) + list_len
    key_bytes = key.encode()
    body_len = 1 + len(varint(len(key_bytes))) + len(key_bytes) + 1 + len(varint(feature_len)) + feature_len
    return (_ENTRY_TAG + varint(body_len) + _KEY_TAG + varint(len(key_bytes)) + key_bytes
            + _VALUE_TAG + varint(feature_len) + _INT64_LIST_TAG + varint(list_len)
            + _PACKED_TAG + varint(payload_len))


def encode_varints(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varint-encode a non-negative int matrix row by row: (flat uint8 buffer, row offsets).

    All values' bytes go into a dense [n, max_bytes] matrix; a boolean mask of the bytes each
    value really uses, read row-major, is exactly the concatenation of the varints.
    """
    values = np.ascontiguousarray(matrix, dtype=np.int64)
    rows = values.shape[0]
    v = values.reshape(rows, -1).ravel()
    if v.size == 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(rows + 1, dtype=np.int64)
    if v.min() < 0:
        raise ValueError("negative ids cannot be varint-encoded compactly")
    max_bytes = max(1, (int(v.max()).bit_length() + 6) // 7)
    nbytes = np.ones(v.shape, dtype=np.int8)
    for k in range(1, max_bytes):
        nbytes += v >= (1 << (7 * k))
    dense = np.empty((v.size, max_bytes), dtype=np.uint8)
    for k in range(max_bytes):
        dense[:, k] = ((v >> (7 * k)) & 0x7F) | ((nbytes > k + 1) << 7)
    out = dense[np.arange(max_bytes, dtype=np.int8)[None, :] < nbytes[:, None]]
    row_ends = np.cumsum(nbytes.reshape(rows, -1).sum(axis=1, dtype=np.int64))
    return out, np.concatenate([[0], row_ends])


def int64_entries(key: str, matrix: np.ndarray) -> list[bytes]:
    """Serialized map entries {key: Int64List(row)} for every row of `matrix`."""
    buf, offsets = encode_varints(matrix)
    raw = buf.tobytes()
    prefix_cache: dict[int, bytes] = {}
    out = []
    for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        n = end - start
        prefix = prefix_cache.get(n)
        if prefix is None:
            prefix = prefix_cache[n] = int64_entry_prefix(key, n)
        out.append(prefix + raw[start:end])
    return out


def encode(columns: dict[str, np.ndarray]) -> list[bytes]:
    """Serialized tf.Examples, one per row of the int64 `columns` ([n] or [n, width]), the
    features in the dict's order."""
    if not len(next(iter(columns.values()))):
        return []
    entries = [int64_entries(name, v if v.ndim == 2 else v[:, None]) for name, v in columns.items()]
    return [example_bytes(*parts) for parts in zip(*entries)]


def example_bytes(*parts: bytes) -> bytes:
    """A serialized tf.Example whose Features are the concatenated map-entry `parts`."""
    return b"".join((_ENTRY_TAG, _varint_cached(sum(map(len, parts))), *parts))


_VARINTS: dict[int, bytes] = {}


def _varint_cached(n: int) -> bytes:
    out = _VARINTS.get(n)
    if out is None:
        out = _VARINTS[n] = varint(n)
    return out


def event_hash(event_ids: list[str] | np.ndarray) -> np.ndarray:
    """A stable 64-bit hash of each id (same on every machine and run; not Python's hash()).

    Vectorized: bytes are weighted by fixed 64-bit powers (wrapping arithmetic), so the zero
    padding numpy adds to shorter ids contributes nothing, then a splitmix64 finalizer mixes.
    """
    ids = np.asarray(event_ids, dtype=object).astype("S")
    if ids.size == 0:
        return np.zeros(0, dtype=np.uint64)
    width = ids.dtype.itemsize
    mat = ids.view(np.uint8).reshape(len(ids), width).astype(np.uint64)
    powers = np.cumprod(np.full(width, np.uint64(0x100000001B3)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = (mat * powers).sum(axis=1, dtype=np.uint64)
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h & _MASK64
