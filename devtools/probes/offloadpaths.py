"""The offload probe's lists and paths (devtools/probes/offload.py): a device pool and a pinned host pool
of twice the list's blocks each, the list's blocks at random slots of both, every path as a `Mover` (one
call moves the list some times: its bytes, its seconds, the host's seconds posting or arming), and the
check of every byte a path moved."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rdmabench.wire import offload
from rdmabench.wire.armed import ArmedPlan

Mover = Callable[[], tuple[int, float, float]]  # () -> (bytes, seconds, host seconds posting)
STEP_SECONDS = 0.01  # a kernel's or a contiguous copy's step: this long at PCIE_GUESS ...
PCIE_GUESS = 50e9  # ... (the list repeated to last it, so the gaps between steps stay small)
BATCH_SECONDS = 0.002  # a batch step: about this long at the submission rate FIELD_NOTES measured


class Lists:
    """The pools and the list at `block` bytes a block on GPU `gpu`, with its offload and armed plans."""

    def __init__(self, cupy: Any, gpu: int, blocks: int, block: int, seed: int):
        self.cupy, self.blocks, self.block, self._checks = cupy, blocks, block, 0
        slots = 2 * blocks
        self.nbytes = slots * block
        self.dev = cupy.zeros(self.nbytes, dtype=cupy.uint8)
        self._host_ptr = cupy.cuda.runtime.hostAlloc(self.nbytes, 1 | 2)  # portable | mapped
        self.host = np.ctypeslib.as_array((ctypes.c_uint8 * self.nbytes).from_address(self._host_ptr))
        rng = np.random.default_rng(seed)
        self.dev_off = rng.permutation(slots)[:blocks].astype(np.int64) * block
        self.host_off = rng.permutation(slots)[:blocks].astype(np.int64) * block
        self.plan = offload.OffloadPlan(
            gpu, (self.dev.data.ptr, self.nbytes), (self._host_ptr, self.nbytes), self.dev_off, self.host_off, block
        )
        dev_ptrs = self.dev.data.ptr + self.dev_off
        host_ptrs = self._host_ptr + self.host_off
        sizes = np.full(blocks, block, dtype=np.int64)
        self.armed = {
            "out": ArmedPlan(dev_ptrs, host_ptrs, sizes, direction="put", where="swap-out"),
            "in": ArmedPlan(host_ptrs, dev_ptrs, sizes, direction="get", where="swap-in"),
        }
        self.list_bytes = blocks * block
        self._pattern = rng.integers(0, 256, self.nbytes, dtype=np.uint8)  # made once: each check XORs a key in

    def close(self) -> None:
        for plan in self.armed.values():
            plan.close()
        self.plan.close()
        self.cupy.cuda.runtime.freeHost(self._host_ptr)

    def __enter__(self) -> Lists:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def repeat(self, path: str) -> int:
        if path in ("kernel", "contig"):
            return max(1, round(STEP_SECONDS * PCIE_GUESS / self.list_bytes))
        if path == "ce-batch":
            return max(1, round(BATCH_SECONDS / (0.55e-6 * self.blocks)))
        return 1

    def _fill(self, direction: str, key: int) -> None:
        """The source pool random (the pattern XOR `key`: each check's bytes differ from the last's), the
        target pool zeros."""
        source = np.bitwise_xor(self._pattern, np.uint8(key))
        if direction == "out":
            self.dev[...] = self.cupy.asarray(source)
            self.host[...] = 0
        else:
            self.host[...] = source
            self.dev[...] = 0
        self.cupy.cuda.runtime.deviceSynchronize()

    def check(self, path: str, direction: str, pace: offload.Pace | None) -> None:
        """Move the list once by `path` and compare every byte of it at both ends; SystemExit otherwise."""
        self._checks += 1
        self._fill(direction, 1 + self._checks % 255)
        if path == "ce-armed":
            self.armed[direction].arm()
            self.armed[direction].release()
        else:
            code = PATH_CODES[path]
            self.plan.step(code, offload.DIRECTIONS[direction], 0, self.blocks, 1, pace)
        dev = self.cupy.asnumpy(self.dev)
        if path == "contig":
            pairs = [(0, 0, self.list_bytes)]
        else:
            pairs = [(int(d), int(h), self.block) for d, h in zip(self.dev_off, self.host_off, strict=True)]
        for d, h, n in pairs:
            if not np.array_equal(dev[d : d + n], self.host[h : h + n]):
                raise SystemExit(f"offload probe: {path} {direction} moved a block wrong (device {d}, host {h})")


PATH_CODES = {"kernel": offload.KERNEL, "ce-batch": offload.CE_BATCH, "direct": offload.DIRECT}
PATH_CODES["contig"] = offload.CONTIGUOUS


def _plan_mover(lists: Lists, path: str, direction: str, pace: offload.Pace | None) -> Mover:
    code, way, repeat = PATH_CODES[path], offload.DIRECTIONS[direction], lists.repeat(path)

    def move() -> tuple[int, float, float]:
        step = lists.plan.step(code, way, 0, lists.blocks, repeat, pace)
        return lists.list_bytes * repeat, step.gpu_seconds, step.post_seconds / repeat

    return move


def _armed_mover(lists: Lists, direction: str) -> Mover:
    """Armed, then released: sustained seconds are the arming's and the release's (one thread does both)."""
    plan = lists.armed[direction]

    def move() -> tuple[int, float, float]:
        arm = plan.arm()
        released = plan.release()
        return lists.list_bytes, arm + released.wall_seconds, arm

    return move


def movers(lists: Lists, direction: str, paces: list[offload.Pace]) -> Iterator[tuple[str, offload.Pace | None, Mover]]:
    """Every path in `direction`: the contiguous reference first, the kernel at each pace, the copy
    engines batched, armed and direct."""
    yield "contig", None, _plan_mover(lists, "contig", direction, None)
    for pace in paces:
        yield "kernel", pace, _plan_mover(lists, "kernel", direction, pace)
    yield "ce-batch", None, _plan_mover(lists, "ce-batch", direction, None)
    yield "ce-armed", None, _armed_mover(lists, direction)
    yield "direct", None, _plan_mover(lists, "direct", direction, None)
