"""A TFRecord shard writer that checksums what it writes in the same pass, off the main thread.

Why not tf.io.TFRecordWriter + re-reading the file for sha256: the manifest needs a sha256 per
shard, and hashing 8.4 KB examples costs about as much as writing them. Writing the TFRecord
framing here (length, masked CRC32C of length, data, masked CRC32C of data: the format TF
documents) lets one background thread feed the same buffers to `file.write` and
`sha256.update`, both of which release the GIL, so hashing and I/O overlap with building the
next examples. GZIP shards (preprocess.compression) fall back to TF's writer and a re-read.
"""
from __future__ import annotations

import hashlib
import os
import queue
import struct
import threading
from pathlib import Path

import google_crc32c

from pipeline.fsutil import sha256_file

_BUFFER = 4 << 20
_FSYNC_EVERY = 64 << 20     # start writeback early, off the main thread: publish's fsync is then quick
_U64 = struct.Struct("<Q").pack
_U32 = struct.Struct("<I").pack


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    return _mask(google_crc32c.value(data))


class ShardWriter:
    """`write(record)` many times, then `close()` -> (bytes written, sha256 hex)."""

    def __init__(self, path: str, compression: str = ""):
        self.path = path
        self.compression = compression
        self._sha = hashlib.sha256()
        self._size = 0
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._headers: dict[int, bytes] = {}
        self._finished = self._closed = False
        if compression:
            import tensorflow as tf

            self._tf_writer = tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=compression))
            return
        self._tf_writer = None
        self._file = open(path, "wb")
        self._queue: queue.Queue = queue.Queue(maxsize=4)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="shard-writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        unsynced = 0
        while (buf := self._queue.get()) is not None:
            try:
                self._file.write(buf)
                self._sha.update(buf)
                unsynced += len(buf)
                if unsynced >= _FSYNC_EVERY:
                    self._file.flush()
                    os.fsync(self._file.fileno())
                    unsynced = 0
            except BaseException as err:     # re-raised by close() in the calling thread
                self._error = err
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except BaseException as err:
            self._error = err

    def _header(self, n: int) -> bytes:
        header = self._headers.get(n)
        if header is None:
            length = _U64(n)
            header = self._headers[n] = length + _U32(masked_crc32c(length))
        return header

    def write(self, record: bytes) -> None:
        self.write_parts((record,))

    def write_parts(self, parts: tuple[bytes, ...]) -> None:
        """Write one record given as consecutive pieces, without concatenating them first."""
        if self._tf_writer is not None:
            self._tf_writer.write(b"".join(parts))
            return
        crc = google_crc32c.value(parts[0])
        for part in parts[1:]:
            crc = google_crc32c.extend(crc, part)
        n = sum(map(len, parts))
        self._pending += (self._header(n), *parts, _U32(_mask(crc)))
        self._pending_size += n + 16
        if self._pending_size >= _BUFFER:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            buf = b"".join(self._pending)
            self._size += len(buf)
            self._queue.put(buf)
            self._pending, self._pending_size = [], 0

    def finish(self) -> None:
        """No more records: hand the rest to the writer thread without waiting for it."""
        if self._tf_writer is None and not self._finished:
            self._flush()
            self._queue.put(None)
            self._finished = True

    def close(self) -> tuple[int, str]:
        """Wait until everything is written and synced: (bytes, sha256 hex)."""
        if self._tf_writer is not None:
            if not self._closed:
                self._tf_writer.close()
                self._closed = True
            return _size_and_sha(self.path)
        self.finish()
        self._thread.join()
        if not self._file.closed:
            self._file.close()
        if self._error is not None:
            raise self._error
        return self._size, self._sha.hexdigest()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.abort()

    def abort(self) -> None:
        """Stop (the caller is failing, or is done): end the thread, close the file."""
        if self._tf_writer is not None:
            if not self._closed:
                self._tf_writer.close()
                self._closed = True
            return
        self._pending = []
        self.finish()
        self._thread.join()
        if not self._file.closed:
            self._file.close()


def _size_and_sha(path: str) -> tuple[int, str]:
    return os.path.getsize(path), sha256_file(Path(path))
