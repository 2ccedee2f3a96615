"""Payload patterns: every message carries bytes that depend on the sender rank, the size and the
message's own number, so a receiver can tell a correct message from a stale, short or corrupted one.
Block lists (--blocks) get the same from BlockPayload: every block of a pool at once."""

from __future__ import annotations

from typing import Any

import numpy as np

from .buffers import Buffer

_MASK64 = (1 << 64) - 1
# splitmix64's constants: the golden-ratio increment and the two mixing multipliers.
_GOLDEN, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _splitmix64(value: int) -> int:
    value = (value + _GOLDEN) & _MASK64
    value = ((value ^ (value >> 30)) * _MIX1) & _MASK64
    value = ((value ^ (value >> 27)) * _MIX2) & _MASK64
    return value ^ (value >> 31)


def _mix(xp: Any, z: Any) -> Any:
    """splitmix64's finaliser over an array of uint64 (in place where it can)."""
    with np.errstate(over="ignore"):
        z ^= z >> xp.uint64(30)
        z *= xp.uint64(_MIX1)
        z ^= z >> xp.uint64(27)
        z *= xp.uint64(_MIX2)
        z ^= z >> xp.uint64(31)
    return z


def block_keys(xp: Any, index: int, count: int, dst: int) -> Any:
    """A distinct non-zero 64-bit key per block of step `index` (splitmix64 of its number), on the
    host or the GPU (`xp`): a step of a million blocks gets its keys in one vectorised pass."""
    z = _mix(np, np.arange(count, dtype=np.uint64) + np.uint64((index * _GOLDEN + dst) & _MASK64))
    z[z == 0] = 1
    return xp.asarray(z)


FILE_SEED = 0x726462_66696C65  # "rdbfile": the storage tests' file pattern


def file_words(xp: Any, first_word: int, count: int) -> Any:
    """The content of a storage test's file from its 8-byte word `first_word` on: word w holds
    splitmix64(w + seed), so every word of every file offset differs and a request that landed at the
    wrong place shows. Built on the host or the GPU (`xp`) in one vectorised pass."""
    z = xp.arange(first_word, first_word + count, dtype=xp.uint64)
    z += xp.uint64(FILE_SEED)
    return _mix(xp, z)


def message_key(*ids: int) -> int:
    """A non-zero 64-bit key for one message, from (iteration, slot, ...)."""
    key = 0x5EED
    for ident in ids:
        key = _splitmix64(key ^ (ident & _MASK64))
    return key or 1


class Pattern:
    """Expected content of a message: a pseudo-random base (seeded by sender rank and size) XOR a
    64-bit key per message. Filling costs one pass over the buffer, checking two."""

    def __init__(self, xp: Any, nbytes: int, src_rank: int):
        self.xp = xp
        self.nbytes = nbytes
        words = (nbytes + 7) // 8
        rng = np.random.default_rng([src_rank, nbytes, 0x7261646D])
        self.base = xp.asarray(np.frombuffer(rng.bytes(words * 8), dtype=np.uint64))
        self._scratch = xp.empty_like(self.base)

    def fill(self, buffer: Buffer, key: int) -> None:
        words = buffer.array.view(self.xp.uint64)[: self.base.size]
        self.xp.bitwise_xor(self.base, self.xp.uint64(key), out=words)

    def wrong_bytes(self, buffer: Buffer, key: int) -> int:
        """Number of bytes among the first `nbytes` that differ from the message `key` describes."""
        return self.wrong_bytes_each([buffer], [key])[0]

    def wrong_bytes_each(self, buffers: list[Buffer], keys: list[int]) -> list[int]:
        """Wrong bytes of each message. On a GPU the counts stay on the device until all are
        known: one wait for the device per step, not one per message (with many processes on a GPU,
        each wait can cost a time slice)."""
        xp = self.xp
        expected = self._scratch.view(xp.uint8)[: self.nbytes]
        if xp is np:  # host memory: a plain comparison first, the count only where it differs
            wrong = []
            for buffer, key in zip(buffers, keys, strict=True):
                np.bitwise_xor(self.base, np.uint64(key), out=self._scratch)
                received = buffer.array[: self.nbytes]
                same = np.array_equal(received, expected)
                wrong.append(0 if same else int(np.count_nonzero(received != expected)))
            return wrong
        counts = xp.zeros(len(buffers), dtype=xp.int64)
        for position, (buffer, key) in enumerate(zip(buffers, keys, strict=True)):
            xp.bitwise_xor(self.base, xp.uint64(key), out=self._scratch)
            counts[position] = xp.count_nonzero(buffer.array[: self.nbytes] != expected)
        return [int(count) for count in counts.get()]


class BlockPayload:
    """Expected content of every block of a step: a base of one block's words (seeded by the sender
    and the block size) XOR a key per block. The pool is read as a matrix of slots x words."""

    def __init__(self, pool: Buffer, block: int, slots: np.ndarray, sender: int):
        self.xp = pool.xp
        self.block = block
        words = block // 8
        slots_in_pool = int(pool.array.size) // block
        self.matrix = pool.array[: slots_in_pool * block].view(self.xp.uint64).reshape(-1, words)
        self.slots = self.xp.asarray(slots)
        rng = np.random.default_rng([sender, block, 0x626C6B73])
        self.base = self.xp.asarray(np.frombuffer(rng.bytes(words * 8), dtype=np.uint64))

    def fill(self, keys: Any) -> None:
        self.matrix[self.slots] = self.base[None, :] ^ keys[:, None]

    def wrong(self, keys: Any) -> tuple[int, int]:
        """(first wrong block, its wrong bytes), or (-1, 0) when every block is right."""
        xp = self.xp
        got = self.matrix[self.slots]
        expected = self.base[None, :] ^ keys[:, None]
        per_block = (got.view(xp.uint8) != expected.view(xp.uint8)).sum(axis=1)
        bad = xp.flatnonzero(per_block)
        if int(bad.size) == 0:
            return -1, 0
        first = int(bad[0])
        return first, int(per_block[first])
