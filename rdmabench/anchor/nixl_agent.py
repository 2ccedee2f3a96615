"""One end of the NIXL anchor (nixl.py), in a process of its own:
`python -m rdmabench.anchor.nixl_agent target|initiator FOLDER`.

NIXL bundles its own UCX build; a process that has loaded the libucx wheel (UCXX, the native loop)
must not load it too. So this module imports only what loads neither: the block shapes, the
statistics, the private folder's helpers and, beside compute, the load (nixl_beside: measure.beside
and wire.gpuload, a CUDA library of rdmabench's own). The anchor makes FOLDER (private, 0700) and writes the
plan there (plan.json); the two ends meet through files in it, each written whole under a temporary
name, then renamed (never through a link, never another user's file: privatedirs):

- target: registers its pool, writes its NIXL metadata (target.meta) and pool address (target.json),
  waits for initiator.done, then (WRITE) checks what landed and writes target.result.json;
- initiator: registers its pool, adds the target (its metadata), connects, prepares both ends'
  descriptor lists (one descriptor per pool slot, as vLLM's connector does), times one contiguous
  descriptor of a transfer's bytes, then the block list, one request a transfer (make_prepped_xfer,
  transfer(), polling check_xfer_state until DONE), then (READ) checks what landed and writes
  initiator.result.json and initiator.done.

Each transfer is timed with time.perf_counter from transfer() to DONE (posting: transfer() alone);
make_prepped_xfer is timed beside it. Payloads are not checked per transfer (validation off); one
check after the last transfer reads the first and last word of every block and the whole first
block against the source's pattern, so a list that moved nothing or the wrong slots fails.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UnsafePathError
from ..measure.blocks import BlockShape
from ..stats import percentile
from .nixl_beside import beside_of, initiator_pairs, target_pairs
from .nixl_files import (
    DONE,
    PLAN,
    AgentError,
    AgentPlan,
    Figures,
    InitiatorResult,
    TargetAddress,
    TargetResult,
    read_file,
    wait_for,
    write_file,
    write_json,
)

_PATTERN = np.uint64(0x9E3779B97F4A7C15)  # word i of a source pool holds i * this (mod 2**64)
# The NIXL wheels' Python packages, by preference: the CUDA 13 build (rdmabench's `nixl` extra), then others.
NIXL_PACKAGES = ("nixl_cu13", "nixl_cu12", "nixl")


def nixl_api() -> Any:
    """NIXL's Python API module (nixl_agent, nixl_agent_config), or None where no wheel is installed."""
    for package in NIXL_PACKAGES:
        try:
            return importlib.import_module(f"{package}._api")
        except ImportError:
            continue
    return None


# --- the pool -----------------------------------------------------------------------------------


class Pool:
    """One end's pool: host memory (numpy, "DRAM") or GPU memory (CuPy, "VRAM", this process's GPU)."""

    def __init__(self, nbytes: int, memory: str):
        words = max(1, nbytes // 8)
        self.memory = memory
        if memory == "VRAM":
            import cupy

            self.xp: Any = cupy
            self.words = cupy.zeros(words, dtype=cupy.uint64)
            self.address = int(self.words.data.ptr)
            self.device = int(cupy.cuda.Device().id)
        else:
            self.xp = np
            self.words = np.zeros(words, dtype=np.uint64)
            self.address = int(self.words.ctypes.data)
            self.device = 0
        self.nbytes = words * 8

    def fill(self) -> None:
        """The source's pattern: word i holds i * _PATTERN."""
        xp = self.xp
        self.words[:] = xp.arange(self.words.size, dtype=xp.uint64) * xp.uint64(_PATTERN)
        self.synchronize()

    def synchronize(self) -> None:
        if self.memory == "VRAM":
            self.xp.cuda.runtime.deviceSynchronize()

    def descriptors(self, size: int, slots: int) -> np.ndarray:
        """Nx3 (address, length, device) of every slot of `size` bytes: the list NIXL prepares."""
        table = np.empty((slots, 3), dtype=np.uint64)
        table[:, 0] = self.address + np.arange(slots, dtype=np.uint64) * np.uint64(size)
        table[:, 1], table[:, 2] = size, self.device
        return table

    def wrong_blocks(self, size: int, mine: np.ndarray, sources: np.ndarray) -> int:
        """Blocks whose first or last word (and, for the first block, any word) is not what the source
        slot held: this end received block j into slot mine[j] from slot sources[j]."""
        xp, per = self.xp, size // 8
        starts = xp.asarray(mine.astype(np.int64) * per)
        source_words = sources.astype(np.uint64) * np.uint64(per)
        wrong = self.words[starts] != xp.asarray(source_words * _PATTERN)
        wrong |= self.words[starts + (per - 1)] != xp.asarray((source_words + np.uint64(per - 1)) * _PATTERN)
        first = int(mine[0]) * per
        expected = (xp.arange(per, dtype=xp.uint64) + xp.uint64(source_words[0])) * xp.uint64(_PATTERN)
        whole_first = bool((self.words[first : first + per] != expected).any())
        return int(wrong.sum()) + int(whole_first and not bool(wrong[0]))


# --- timing ---------------------------------------------------------------------------------------


def _transfer(agent: Any, handle: Any, deadline: float) -> tuple[float, float]:
    """Post `handle` and poll it to DONE: (seconds in transfer(), seconds to DONE)."""
    began = time.perf_counter()
    state = agent.transfer(handle)
    posted = time.perf_counter()
    while state == "PROC":
        state = agent.check_xfer_state(handle)
        if time.monotonic() > deadline:
            raise AgentError("a NIXL transfer did not finish in time")
    done = time.perf_counter()
    if state != "DONE":
        raise AgentError(f"a NIXL transfer ended in state {state}")
    return posted - began, done - began


@dataclass
class Timed:
    """Timed transfers: each one's seconds to DONE, in transfer() and making its request; NIXL's own
    telemetry of each (its post and transfer us, descriptors posted); the CPU seconds they took."""

    totals: list[float] = field(default_factory=list)
    posts: list[float] = field(default_factory=list)
    makes: list[float] = field(default_factory=list)
    told: list[tuple[float, float, int]] = field(default_factory=list)
    cpu: float = 0.0
    first: float = 0.0  # the first transfer's seconds, its request's making included (cold)

    def __add__(self, other: Timed) -> Timed:
        return Timed(
            self.totals + other.totals, self.posts + other.posts, self.makes + other.makes, self.told + other.told,
            self.cpu + other.cpu, self.first,
        )  # fmt: skip


def timed_transfers(agent: Any, request: Any, plan: AgentPlan, seconds: float, deadline: float) -> Timed:
    """Transfers made by `request()` -> (handle, seconds making it, release): the first alone (cold),
    then plan["warmup"] untimed, then for `seconds` (at least min, at most max transfers); AgentError
    past the end's `deadline`."""
    handle, make, release = request()
    found = Timed(first=make + _transfer(agent, handle, deadline)[1])
    release(handle)
    for _ in range(plan["warmup"]):
        handle, _make, release = request()
        _transfer(agent, handle, deadline)
        release(handle)
    cpu, started = time.process_time(), time.monotonic()
    while len(found.totals) < plan["max_transfers"] and (
        len(found.totals) < plan["min_transfers"] or time.monotonic() - started < seconds
    ):
        handle, make, release = request()
        post, total = _transfer(agent, handle, deadline)
        found.told.extend(_telemetry(agent, handle))
        release(handle)
        found.makes.append(make)
        found.posts.append(post)
        found.totals.append(total)
    found.cpu = time.process_time() - cpu
    return found


def measure(agent: Any, request: Any, plan: AgentPlan, moved: int, count: int, deadline: float) -> Figures:
    """Time transfers made by `request()` for plan["seconds"] (timed_transfers): what they did."""
    return summarize(timed_transfers(agent, request, plan, plan["seconds"], deadline), moved, count)


def summarize(timed: Timed, moved: int, count: int) -> Figures:
    """Timed transfers' figures: per transfer, NIXL's telemetry, the first transfer and the CPU."""
    found = summary(timed.totals, timed.posts, timed.makes, moved, count)
    told = timed.told
    if told:
        found["nixl_telemetry"] = {
            "post_us_p50": percentile([t[0] for t in told], 50), "transfer_us_p50": percentile([t[1] for t in told], 50),
            "descriptors_posted": told[-1][2],
        }  # fmt: skip
    found["first_transfer_s"] = timed.first
    found["cpu_s_per_gb"] = timed.cpu / (moved * len(timed.totals) / 1e9)
    return found


def _telemetry(agent: Any, handle: Any) -> list[tuple[float, float, int]]:
    """NIXL's own account of a finished transfer (us posting, us to completion, descriptors it posted
    after merging neighbours), where the agent keeps one."""
    try:
        told = agent.get_xfer_telemetry(handle)
    except Exception:  # telemetry off or not offered by this NIXL: nothing to add
        return []
    return [(float(told.postDuration), float(told.xferDuration), int(told.descCount))]


def summary(totals: list[float], posts: list[float], makes: list[float], moved: int, count: int) -> Figures:
    """What the anchor reports of the timed transfers (the fields rdmabench's block record has)."""
    median = percentile(totals, 50)
    return {
        "transfers": len(totals),
        "transfer_us": {f"p{q:g}": percentile(totals, q) * 1e6 for q in (50, 99, 99.9)} | {"max": max(totals) * 1e6},
        "transfer_gbps_p50": moved / median / 1e9,
        "transfer_gbps_mean": moved * len(totals) / sum(totals) / 1e9,  # all bytes over all transfers' time
        "descriptors_per_second_p50": count / median,
        "post_us_p50": percentile(posts, 50) * 1e6,
        "post_share_p50": percentile([p / t for p, t in zip(posts, totals, strict=True)], 50),
        "make_us_p50": percentile(makes, 50) * 1e6 if makes else 0.0,
    }


# --- the two ends ---------------------------------------------------------------------------------


def _agent(name: str, plan: AgentPlan) -> tuple[Any, float]:
    """An agent with the UCX backend configured as vLLM's connector does: `threads` for the backend
    (vLLM passes 4; 0: NIXL's default) and NIXL's own telemetry of each transfer on."""
    api = nixl_api()
    if api is None:
        raise AgentError("NIXL is not installed")
    began = time.perf_counter()
    config = api.nixl_agent_config(backends=["UCX"], num_threads=plan["threads"], capture_telemetry=True)
    agent = api.nixl_agent(name, config)
    return agent, time.perf_counter() - began


def _register(agent: Any, pool: Pool) -> float:
    began = time.perf_counter()
    agent.register_memory([(pool.address, pool.nbytes, pool.device, "")], pool.memory)
    return time.perf_counter() - began


def _shape(plan: AgentPlan) -> BlockShape:
    return BlockShape(**plan["shape"]).check()


def _pool_bytes(plan: AgentPlan) -> int:
    shape = _shape(plan)
    return shape.pool_slots(plan["size"]) * plan["size"]


def _ends(plan: AgentPlan) -> tuple[str, str]:
    """This process's end of the link and the other's, for the initiator: src for WRITE, dst for READ."""
    return ("src", "dst") if plan["operation"] == "WRITE" else ("dst", "src")


def run_target(folder: Path, plan: AgentPlan) -> TargetResult:
    deadline = time.monotonic() + plan["timeout"]
    agent, agent_s = _agent("rdmabench-nixl-target", plan)
    pool = Pool(_pool_bytes(plan), plan["memory"])
    if plan["operation"] == "READ":
        pool.fill()
    register_s = _register(agent, pool)
    began = time.perf_counter()
    metadata = agent.get_agent_metadata()
    metadata_s = time.perf_counter() - began
    write_file(folder, "target.meta", metadata)
    address: TargetAddress = {"address": pool.address, "pid": os.getpid()}
    write_json(folder, "target.json", address)
    cpu = time.process_time()
    result: TargetResult = {"agent_s": agent_s, "register_s": register_s, "metadata_s": metadata_s}
    beside = beside_of(plan)
    if beside is not None:  # this GPU computes through the initiator's pairs
        result["beside_load"] = target_pairs(folder, plan, beside, deadline)
    wait_for(folder, DONE, deadline)
    result["cpu_s"] = time.process_time() - cpu
    if plan["operation"] == "WRITE":
        shape, size = _shape(plan), plan["size"]
        pool.synchronize()
        result["wrong_blocks"] = pool.wrong_blocks(size, shape.slots("dst", size), shape.slots("src", size))
    return result


def run_initiator(folder: Path, plan: AgentPlan) -> InitiatorResult:
    deadline = time.monotonic() + plan["timeout"]
    shape, size, operation, memory = _shape(plan), plan["size"], plan["operation"], plan["memory"]
    mine, theirs = _ends(plan)
    agent, agent_s = _agent("rdmabench-nixl-initiator", plan)
    pool = Pool(_pool_bytes(plan), memory)
    if operation == "WRITE":
        pool.fill()
    cold: dict[str, float] = {"agent": agent_s, "register": _register(agent, pool)}
    target = json.loads(wait_for(folder, "target.json", deadline))
    metadata = read_file(folder, "target.meta")
    began = time.perf_counter()
    peer = agent.add_remote_agent(metadata)
    cold["metadata"] = time.perf_counter() - began
    began = time.perf_counter()
    agent.make_connection(peer)
    cold["connect"] = time.perf_counter() - began
    slots = shape.pool_slots(size)
    remote = pool.descriptors(size, slots)
    remote[:, 0] = target["address"] + np.arange(slots, dtype=np.uint64) * np.uint64(size)
    began = time.perf_counter()
    local_list = agent.prep_xfer_dlist("NIXL_INIT_AGENT", pool.descriptors(size, slots), memory)
    remote_list = agent.prep_xfer_dlist(peer, remote, memory)
    local_ids = shape.slots(mine, size).astype(np.int32)
    remote_ids = shape.slots(theirs, size).astype(np.int32)
    cold["prepare"] = time.perf_counter() - began
    moved = shape.count * size
    reference = _reference(agent, pool, target["address"], moved, peer, plan, deadline)

    def request() -> tuple[Any, float, Any]:
        began = time.perf_counter()
        handle = agent.make_prepped_xfer(operation, local_list, local_ids, remote_list, remote_ids)
        return handle, time.perf_counter() - began, agent.release_xfer_handle

    blocks = measure(agent, request, plan, moved, shape.count, deadline)
    cold["first_transfer"] = blocks.pop("first_transfer_s")
    result: InitiatorResult = {"blocks": blocks, "reference": reference, "cold_s": cold, "backend": "UCX"}
    beside = beside_of(plan)
    if beside is not None:  # the same list again, while both GPUs compute, pair by pair
        share = plan["seconds"] / plan["pairs"]
        runs, load = initiator_pairs(
            folder, plan, beside, lambda: timed_transfers(agent, request, plan, share, deadline), deadline
        )  # fmt: skip
        together = summarize(sum(runs[1:], runs[0]), moved, shape.count)
        together["load"], together["pairs_gbps"] = load, [moved / percentile(run.totals, 50) / 1e9 for run in runs]
        result["beside"] = together
    if operation == "READ":
        pool.synchronize()
        result["wrong_blocks"] = pool.wrong_blocks(size, local_ids, remote_ids)
    return result


def _reference(agent: Any, pool: Pool, remote: int, moved: int, peer: Any, plan: AgentPlan, deadline: float) -> Figures:
    """The transfer's bytes as one contiguous descriptor (from slot 0 at both ends), one handle reposted."""
    local = agent.get_xfer_descs([(pool.address, moved, pool.device)], pool.memory)
    far = agent.get_xfer_descs([(remote, moved, pool.device)], pool.memory)
    handle = agent.initialize_xfer(plan["operation"], local, far, peer)
    try:
        found = measure(agent, lambda: (handle, 0.0, lambda _handle: None), plan, moved, 1, deadline)
    finally:
        agent.release_xfer_handle(handle)
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("target", "initiator"):
        print("usage: python -m rdmabench.anchor.nixl_agent target|initiator FOLDER", file=sys.stderr)
        return 2
    role, folder = argv[1], Path(argv[2])
    try:
        plan = json.loads(read_file(folder, PLAN))
        result = (run_target if role == "target" else run_initiator)(folder, plan)
    except (AgentError, OSError, UnsafePathError, ValueError) as exc:
        print(f"nixl {role}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # NIXL raises its own exception types (nixlBind errors): one line each
        print(f"nixl {role}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    write_json(folder, f"{role}.result.json", result)
    if role == "initiator":
        write_file(folder, DONE, b"")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
