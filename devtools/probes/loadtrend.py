"""Does the beside load slow by itself over a row's few seconds? A probe of the GEMM alone, no transfer.

The beside benchmark holds each pair's alone windows to the load settled before the row's first pair;
on four H200s the GEMM alone read about 3% slower by a row's last pair, and every row's settled figure
was back at the fresh one after the GPU idled between rows. This runs the load alone on one GPU from
idle for `--seconds`, continuously, then idles `--rest` seconds and runs it `--again` seconds more,
and prints the mean operation time of each `--bucket` of the run (against the first settled bucket)
with the GPU's SM clock, power and temperature (NVML, sampled beside it). A slope in the first run
with no transfer anywhere is the load's own; one that is gone after the rest recovers within it.

    python -m devtools.probes.loadtrend --gpu 0 [--seconds 4 --rest 1.5 --again 1.5 --bucket 0.2]
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from rdmabench.hardware.gpu import import_cupy
from rdmabench.measure.beside import LOADS
from rdmabench.wire.gpuload import WHOLE, ComputeLoad


def _sampler(gpu: int, stop: threading.Event, out: list[tuple[float, float, float, float]]) -> None:
    """(time, SM clock MHz, power W, temperature C) every 50 ms until `stop`; nothing without pynvml."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
    except Exception:  # a probe without NVML still times the load
        return
    while not stop.is_set():
        clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
        temperature = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
        out.append((time.perf_counter(), float(clock), power, float(temperature)))
        time.sleep(0.05)


def _run(load: ComputeLoad, seconds: float) -> tuple[float, list[float]]:
    """The load alone for `seconds`: when it started and every operation's GPU seconds."""
    began = time.perf_counter()
    load.start(WHOLE)
    while time.perf_counter() - began < seconds:
        time.sleep(0.01)
    return began, load.stop().seconds


def _buckets(label: str, began: float, seconds: list[float], bucket: float, base: float | None, nvml: Any) -> float:
    """Print the run by buckets of `bucket` seconds of operations; returns the reference (the first
    bucket after the first, where none was given)."""
    edges: list[tuple[float, int]] = []  # (mean seconds an operation, operations) a bucket
    clock, mean_of = 0.0, []
    for value in seconds:
        mean_of.append(value)
        clock += value
        if clock >= bucket:
            edges.append((sum(mean_of) / len(mean_of), len(mean_of)))
            mean_of, clock = [], 0.0
    t = 0.0  # the operations run back to back: a bucket's start is the sum of those before it
    for index, (mean, count) in enumerate(edges):
        if base is None and index == 1:
            base = mean
        at = began + t
        near = [s for s in nvml if abs(s[0] - at - bucket / 2) < bucket / 2]
        sm = (
            f"{sum(s[1] for s in near) / len(near):6.0f} MHz {sum(s[2] for s in near) / len(near):5.0f} W "
            if near
            else ""
        )
        temp = f"{max(s[3] for s in near):3.0f} C" if near else ""
        ratio = f"{mean / base:6.3f}" if base else "     -"
        print(f"{label} {t:5.2f}s  {mean * 1e3:7.4f} ms/op  x{ratio}  ({count} ops)  {sm}{temp}")
        t += mean * count
    return base or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--size", type=int, default=LOADS["gemm"].default)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rest", type=float, default=1.5)
    parser.add_argument("--again", type=float, default=1.5)
    parser.add_argument("--bucket", type=float, default=0.2)
    args = parser.parse_args()
    cupy = import_cupy()
    if cupy is None:
        raise SystemExit("loadtrend: needs a CUDA GPU and CuPy")
    cupy.cuda.runtime.setDevice(args.gpu)
    load = ComputeLoad(args.gpu, LOADS["gemm"].code, args.size)
    nvml: list[tuple[float, float, float, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, args=(args.gpu, stop, nvml), daemon=True)
    sampler.start()
    time.sleep(1.0)  # idle, as between the benchmark's rows
    try:
        began, first = _run(load, args.seconds)
        time.sleep(args.rest)
        again_began, again = _run(load, args.again)
    finally:
        stop.set()
        load.release()
    base = _buckets(f"gpu{args.gpu} run  ", began, first, args.bucket, None, nvml)
    _buckets(f"gpu{args.gpu} again", again_began, again, args.bucket, base, nvml)


if __name__ == "__main__":
    main()
