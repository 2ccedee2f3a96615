"""What the GPU path's list costs a GEMM kept running beside it for seconds, timed by CUDA events alone.

The beside benchmark reads the GPU path at 1 MiB on the whole GPU from pairs of 80 ms windows; FIELD_NOTES
has a CUDA-event probe of the same kind of list reading the GEMM about 2.8x slower on H200 where the
benchmark read 2.33x. This is that probe, kept beside the benchmark: on GPU 0 the bf16 GEMM of the beside
load (wire.gpuload, each operation timed by its own CUDA events) runs continuously; after SETTLE_SECONDS
(past its power limit) it runs `--seconds` alone, then as long beside a copy kernel moving `--blocks`
random blocks of `--block` bytes from a pool on GPU 0 into one on GPU 1 through peer pointers, over and
over, then as long alone again. The kernel has the GPU path's shape on the whole GPU (devlists.cu's
copy_blocks: 64 KiB items, one CUDA block of 256 threads an item, 16-byte words, a grid of the GPU's SMs x 8),
the shape UCX's device API puts run in (its ucx_put_blocks over cuda_ipc copies the same items); its
time is CUDA events around the whole run of lists. The slowdown is the GEMM's mean operation time beside
over the mean of the two alone stretches (a mean: the operations the copies stalled count).

    python -m devtools.probes.gpusustained [--seconds 3 --block 1MiB --blocks 1024 --gemm 8192]

It prints one line: `probe gpu 1MiB whole GPU: GEMM xS (alone before/after A/B ms), list G GB/s`; the
beside benchmark reads it (devtools/besidebench.py). Needs two GPUs with peer access and CuPy.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from rdmabench.hardware.gpu import import_cupy
from rdmabench.measure.beside import LOADS, WHOLE
from rdmabench.measure.pairs import SETTLE_SECONDS
from rdmabench.units import format_size, parse_size
from rdmabench.wire.gpuload import ComputeLoad

CHUNK, THREADS, PER_SM = 64 << 10, 256, 8  # devlists.cu's CHUNK, THREADS and grid (SMs x 8)
LAUNCHES_AHEAD = 4  # lists queued on the copy stream before the host waits for the oldest
_SOURCE = r"""
extern "C" __global__ void copy_blocks(char *dst, const unsigned long long *dst_offsets, const char *src,
                                       const unsigned long long *src_offsets, unsigned long long count,
                                       unsigned long long block)
{
    unsigned long long per = (block + CHUNK - 1) / CHUNK;
    for (unsigned long long w = blockIdx.x; w < count * per; w += gridDim.x) {
        unsigned long long i = w / per, at = (w % per) * CHUNK;
        unsigned long long length = block - at < CHUNK ? block - at : CHUNK;
        const int4 *s = reinterpret_cast<const int4 *>(src + src_offsets[i] + at);
        int4 *d = reinterpret_cast<int4 *>(dst + dst_offsets[i] + at);
        for (unsigned long long k = threadIdx.x; k < length / 16; k += blockDim.x)
            d[k] = s[k];
    }
}
"""


@dataclass(frozen=True)
class Probe:
    """What the probe measured: the GEMM's mean operation seconds alone before, beside and alone after,
    the operations each held, and the list's GB/s beside (CUDA events over the whole run of lists)."""

    before: float
    beside: float
    after: float
    operations: tuple[int, int, int]
    gbps: float

    @property
    def slowdown(self) -> float:
        return self.beside / ((self.before + self.after) / 2)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


class Copies:
    """The list on GPU 0's copy stream: `blocks` random slots of a pool of 4 x as many on each GPU (as
    `--layout random`), GPU 0's into GPU 1's through peer access."""

    def __init__(self, cupy: Any, block: int, blocks: int):
        self.cupy, self.block, self.blocks = cupy, block, blocks
        rng = np.random.default_rng(1)  # CuPy's Generator has no permutation (the first GPU run failed on it)
        with cupy.cuda.Device(1):
            self.dst = cupy.zeros(4 * blocks * block, dtype=cupy.uint8)
        with cupy.cuda.Device(0):
            try:
                cupy.cuda.runtime.deviceEnablePeerAccess(1)
            except cupy.cuda.runtime.CUDARuntimeError:
                pass  # enabled already
            self.src = cupy.ones(4 * blocks * block, dtype=cupy.uint8)
            self.src_offsets = cupy.asarray((rng.permutation(4 * blocks)[:blocks] * block).astype(np.uint64))
            self.dst_offsets = cupy.asarray((rng.permutation(4 * blocks)[:blocks] * block).astype(np.uint64))
            self.kernel = cupy.RawKernel(_SOURCE, "copy_blocks", options=(f"-DCHUNK={CHUNK}ULL",))
            sms = cupy.cuda.Device(0).attributes["MultiProcessorCount"]
            items = blocks * -(-block // CHUNK)
            self.grid = min(items, sms * PER_SM)
            self.stream = cupy.cuda.Stream(non_blocking=True)

    def launch(self) -> None:
        args = (self.dst, self.dst_offsets, self.src, self.src_offsets, self.cupy.uint64(self.blocks))
        self.kernel((self.grid,), (THREADS,), (*args, self.cupy.uint64(self.block)), stream=self.stream)

    def run(self, seconds: float) -> float:
        """Lists back to back for `seconds` (at most LAUNCHES_AHEAD queued): their GB/s by CUDA events."""
        cupy = self.cupy
        with cupy.cuda.Device(0):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(self.stream)
            queued: list[Any] = []
            lists, began = 0, time.perf_counter()
            while time.perf_counter() - began < seconds:
                self.launch()
                lists += 1
                done = cupy.cuda.Event()
                done.record(self.stream)
                queued.append(done)
                if len(queued) >= LAUNCHES_AHEAD:
                    queued.pop(0).synchronize()
            end.record(self.stream)
            end.synchronize()
            elapsed = cupy.cuda.get_elapsed_time(start, end) / 1e3
        return lists * self.blocks * self.block / elapsed / 1e9


def probe(block: int, blocks: int, seconds: float, gemm: int) -> Probe:
    """The GEMM on GPU 0 settled, then alone, beside the list and alone again, `seconds` each."""
    cupy = import_cupy()
    if cupy is None or cupy.cuda.runtime.getDeviceCount() < 2:
        raise SystemExit("gpusustained: needs two CUDA GPUs and CuPy")
    copies = Copies(cupy, block, blocks)
    with cupy.cuda.Device(0):
        copies.launch()  # compiled and loaded before the load runs
        cupy.cuda.Device(0).synchronize()
    load = ComputeLoad(0, LOADS["gemm"].code, gemm)
    try:
        load.start(WHOLE)
        time.sleep(SETTLE_SECONDS)
        marks = [load.done()]
        time.sleep(seconds)
        marks.append(load.done())
        gbps = copies.run(seconds)
        marks.append(load.done())
        time.sleep(seconds)
        marks.append(load.done())
        kept = load.stop().seconds
        number = load.done() - len(kept)  # the first kept operation's (the library keeps the latest RING)
    finally:
        load.release()
    return windows(kept, number, marks, gbps)


def windows(kept: list[float], number: int, marks: list[int], gbps: float) -> Probe:
    """The three stretches between the `marks` (operations done at each), from the load's `kept`
    operations, the first of them operation `number`: each stretch's, the one running at a mark left out."""

    def between(low: int, high: int) -> list[float]:
        return kept[max(low + 1 - number, 0) : max(high - number, 0)]

    parts = [between(marks[i], marks[i + 1]) for i in range(3)]
    before, beside, after = (_mean(part) for part in parts)
    return Probe(before, beside, after, (len(parts[0]), len(parts[1]), len(parts[2])), gbps)


def line(found: Probe, block: int) -> str:
    """The probe's one line (besidebench reads its `xS` and `G GB/s`)."""
    return (
        f"probe gpu {format_size(block)} whole GPU: GEMM x{found.slowdown:.3f} (alone before/after "
        f"{found.before * 1e3:.4f}/{found.after * 1e3:.4f} ms, beside {found.beside * 1e3:.4f} ms; "
        f"operations {'/'.join(map(str, found.operations))}), list {found.gbps:.1f} GB/s (CUDA events)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--block", default="1MiB")
    parser.add_argument("--blocks", type=int, default=1024)
    parser.add_argument("--gemm", type=int, default=LOADS["gemm"].default)
    args = parser.parse_args()
    block = parse_size(args.block)
    print(line(probe(block, args.blocks, args.seconds, args.gemm), block), flush=True)


if __name__ == "__main__":
    main()
