"""KV offload to pinned host memory beside a model (issue 53): every posting path alone and beside a bf16 GEMM.

On one GPU, `--blocks` random blocks between a device pool and a cudaHostAlloc'd pool, both directions
(out: device -> host, in: host -> device), each size of `--sizes`, by every path of wire/offload.py:
the contiguous copy (the reference), the copy kernel at each `--paces` (SMSxCTASxTHREADS: its CTAs on
a GEMM carved those SMs), the copy engines batched (one cudaMemcpyBatchAsync a list), armed
(wire/armed.py: arming on the clock of the sustained figure) and direct (one cudaMemcpyAsync a block).
Every path's every byte is checked once per size and direction before it is timed.

Beside: the model's cost as rdmabench's beside rows measure it (measure/beside.py): the GEMM's
operations timed by CUDA events (wire/gpuload.py), the load settled past its power limit
(SETTLE_SECONDS) before its windows, each pair an alone window, a shared window with the transfers
back to back for all of it, and an alone window after; the slowdown is the shared window's mean
operation time over the whole GPU's alone mean (the carve-out's own cost included, and shown apart).
GB/s beside are bytes over the shared window's transfer time (its GPU events; the posting thread's
time included where it is the bottleneck: direct, batch; the armed path's arming too).

    python -m devtools.probes.offload [--gpu 0] [--blocks 1024] [--sizes 4KiB,64KiB]
        [--paces 8x1x128,8x2x128,...] [--window 0.25] [--pairs 2] [--json out.jsonl]
        [--directions out,in] [--paths contig,kernel,...]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from devtools.probes.offloadpaths import Lists, Mover, movers
from rdmabench.hardware.gpu import import_cupy
from rdmabench.measure.beside import LOADS
from rdmabench.measure.pairs import SETTLE_SECONDS
from rdmabench.units import format_size, parse_size
from rdmabench.wire import offload
from rdmabench.wire.gpuload import CARVED, WHOLE, ComputeLoad

DEFAULT_PACES = "4x1x128,8x1x128,8x2x128,16x1x128,8x3x128,8x4x128,16x2x128,8x4x256"
WARM_SECONDS = 0.15  # after a (re)start of the load, left out


@dataclass
class Window:
    """Operations [first, last) of a load run, and what moved in the window."""

    first: int
    last: int
    nbytes: int = 0
    seconds: float = 0.0  # the transfers' time in it
    post_seconds: float = 0.0


def _wait_ops(load: ComputeLoad, seconds: float) -> Window:
    mark, began = load.done(), time.perf_counter()
    while time.perf_counter() - began < seconds:
        time.sleep(0.002)
    return Window(mark + 1, load.done())


def _shared(load: ComputeLoad, move: Mover, seconds: float) -> Window:
    """Transfers back to back for `seconds` with the load running: the operations wholly inside."""
    mark, began = load.done(), time.perf_counter()
    window = Window(mark + 1, mark + 1)
    while time.perf_counter() - began < seconds:
        nbytes, spent, posted = move()
        window.nbytes += nbytes
        window.seconds += spent
        window.post_seconds += posted
    window.last = load.done()
    return window


def _mean(times: list[float], window: Window) -> float:
    found = times[window.first : window.last]
    return sum(found) / len(found) if found else float("nan")


def session(
    load: ComputeLoad, carve: int, jobs: list[tuple[dict[str, Any], Mover]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """One run of the load: settled on the whole GPU (its alone reference), then, where `carve`, the
    carved plan; then each job's pairs. Returns a record a job with its slowdowns."""
    load.start(WHOLE)
    time.sleep(SETTLE_SECONDS)
    whole_window = _wait_ops(load, args.window)
    whole_times = load.stop().seconds
    whole = _mean(whole_times, whole_window)
    if carve:
        load.carve(carve)
    load.start(CARVED if carve else WHOLE)
    time.sleep(WARM_SECONDS)
    marks: list[tuple[dict[str, Any], list[tuple[Window, Window, Window]]]] = []
    for record, move in jobs:
        pairs = []
        for _ in range(args.pairs):
            before = _wait_ops(load, args.window)
            shared = _shared(load, move, args.window)
            pairs.append((before, shared, _wait_ops(load, args.window)))
        marks.append((record, pairs))
    times = load.stop().seconds
    out = []
    for record, pairs in marks:
        alone = [(_mean(times, b) + _mean(times, a)) / 2 for b, _, a in pairs]
        together = [_mean(times, s) for _, s, _ in pairs]
        gbps = [s.nbytes / s.seconds / 1e9 if s.seconds else 0.0 for _, s, _ in pairs]
        record = dict(record, carve=carve, gemm_whole_alone_ms=whole * 1e3)
        record["slowdown"] = [x / whole for x in together]  # against the whole GPU alone: the beside metric
        record["transfer_cost"] = [x / y for x, y in zip(together, alone, strict=True)]  # against its own alone
        record["carve_cost"] = sum(alone) / len(alone) / whole
        record["gbps_beside"] = gbps
        record["duty"] = [min(1.0, s.seconds / args.window) for _, s, _ in pairs]
        out.append(record)
    return out


def alone(move: Mover, steps: int = 5) -> tuple[float, float]:
    """(GB/s, host seconds posting a list) alone: the median of `steps` steps after one warm-up."""
    move()
    found = [move() for _ in range(steps)]
    rates = sorted(n / s / 1e9 for n, s, _ in found)
    return rates[len(rates) // 2], sorted(p for _, _, p in found)[len(found) // 2]


def _print(record: dict[str, Any]) -> None:
    head = f"{record['size']:>6} {record['direction']:>3} {record['path']:<9} {record.get('pace', ''):<9}"
    if "gbps_alone" in record:
        print(f"{head} alone {record['gbps_alone']:7.2f} GB/s  post {record['post_us_per_block']:.3f} us/block")
        return
    slow = " ".join(f"{x:.3f}" for x in record["slowdown"])
    gbps = " ".join(f"{x:6.2f}" for x in record["gbps_beside"])
    print(
        f"{head} beside {gbps} GB/s  slowdown x {slow}  (carve {record['carve']} costs {record['carve_cost']:.3f};"
        f" duty {min(record['duty']):.2f})"
    )


def measure_size(
    cupy: Any, load: ComputeLoad, block: int, args: argparse.Namespace, emit: Callable[[dict[str, Any]], None]
) -> None:
    """Every path both ways at `block`: checked, alone, then beside in sessions by carve-out."""
    paces = [offload.Pace.parse(p) for p in args.paces.split(",") if p]
    with Lists(cupy, args.gpu, args.blocks, block, args.seed) as lists:
        sessions: dict[int, list[tuple[dict[str, Any], Mover]]] = {}
        for direction in args.directions.split(","):
            for name, pace, move in movers(lists, direction, paces):
                if args.paths and name not in args.paths.split(","):
                    continue
                lists.check(name, direction, pace)
                base = {"size": format_size(block), "block": block, "blocks": args.blocks, "direction": direction}
                base.update(path=name, pace=pace.label if pace else "", in_flight=pace.in_flight if pace else 0)
                gbps, post = alone(move)
                emit(dict(base, gbps_alone=gbps, post_us_per_block=post / args.blocks * 1e6))
                if name != "contig":
                    sessions.setdefault(pace.sms if pace else 0, []).append((base, move))
        for carve in sorted(sessions):
            for record in session(load, carve, sessions[carve], args):
                emit(record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--blocks", type=int, default=1024)
    parser.add_argument("--sizes", default="4KiB,64KiB")
    parser.add_argument("--paces", default=DEFAULT_PACES)
    parser.add_argument("--window", type=float, default=0.25)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=53)
    parser.add_argument("--json", default="")
    parser.add_argument("--directions", default="out,in")
    parser.add_argument("--paths", default="", help="only these paths (contig,kernel,ce-batch,ce-armed,direct)")
    args = parser.parse_args()
    cupy = import_cupy()
    if cupy is None:
        raise SystemExit("offload probe: needs a CUDA GPU and CuPy")
    missing = offload.why_not(args.gpu)
    if missing:
        raise SystemExit(f"offload probe: {missing}")
    cupy.cuda.runtime.setDevice(args.gpu)
    sink = open(args.json, "a") if args.json else None  # kept open for the whole run

    def emit(record: dict[str, Any]) -> None:
        _print(record)
        if sink is not None:
            sink.write(json.dumps(record) + "\n")
            sink.flush()

    load = ComputeLoad(args.gpu, LOADS["gemm"].code, LOADS["gemm"].default)
    try:
        for size in args.sizes.split(","):
            measure_size(cupy, load, parse_size(size), args, emit)
    finally:
        load.release()
        if sink is not None:
            sink.close()


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
