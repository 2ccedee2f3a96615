"""The KV-handoff benchmark beside a model (issue 44's targets), with its anchors measured in the same run.

    python -m devtools.besidebench [--sizes 4KiB,64KiB,1MiB] [--blocks 1024] [--carveout all] [--out DIR]

On a node of two GPUs: first the anchors, then one `rdmabench run` of every posting path and carve-out
beside a bf16 GEMM on each GPU, then the targets as ratios against those anchors:
- the GEMM alone: 40 back-to-back GEMMs on GPU 0 after SETTLE_SECONDS of them, each timed by its own CUDA events
  (three rounds; the beside figures' alone half must read within 5% of it);
- `cudaMemcpyPeer` of the list's bytes as one copy, GPU 0 -> GPU 1 (median of 7);
- per block size and path (a carve-out is a path of its own): GB/s beside the GEMM, the model's
  slowdown against the whole GPU alone with its 95% interval (measure/slowdown.py: every pair whose duty
  is at least the floor; the pairs used of those taken), its noise floor, the duty, the alone drift, and
  the list's sustained GB/s (one posting thread back to back) with that thread's microseconds a descriptor;
- the CUDA-event probe of the GPU path at 1 MiB on the whole GPU kept beside the same GEMM for seconds
  (devtools/probes/gpusustained.py), against the run's own row.
Then issue 54's targets: every row's slowdown with an interval, at least 90% of rows within +-2 points,
the run under 180 s, the engine's 1 MiB GPU row within 15% of the probe.
A developer harness: it prints what it measured and never changes a default test.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rdmabench.measure.slowdown import TARGET
from rdmabench.results.files.docrecord import ResultsDocument
from rdmabench.results.files.document import load as load_results
from rdmabench.stats import median
from rdmabench.units import format_size, parse_size

GEMM_M = 8192
RUN_SECONDS = 180.0  # issue 54: the run under this
WITHIN_SHARE = 0.9  # issue 54: at least this share of rows with an interval within +-TARGET
PROBE_AGREE = 0.15  # issue 54: the engine's GPU row at 1 MiB within this of the CUDA-event probe
# (block size, path, GB/s at least, slowdown at most): issue 44's targets; ce-armed on the whole GPU, a
# carve-out any N > 0 of the GPU path.
TARGETS = [
    (4 << 10, "ce-armed", 140.0, 1.03),
    (4 << 10, "carveout", 100.0, 1.06),
    (64 << 10, "ce-armed", 300.0, 1.03),
    (64 << 10, "carveout", 180.0, 1.05),
]


def gemm_reference(rounds: int = 3, count: int = 40) -> list[float]:
    """TFLOP/s of `count` back-to-back bf16 GEMMs on GPU 0, each timed by CUDA events, `rounds` times,
    each after `SETTLE_SECONDS` of GEMMs left out (a GEMM started on an idle GPU runs faster until its
    power reaches the GPU's limit), as the beside rows' own load is settled."""
    from rdmabench.measure.pairs import SETTLE_SECONDS
    from rdmabench.wire.gpuload import GEMM, ComputeLoad

    load = ComputeLoad(0, GEMM, GEMM_M)
    found = []
    try:
        for _ in range(rounds):
            load.start()
            time.sleep(SETTLE_SECONDS)
            mark = load.done()
            while load.done() < mark + count:
                time.sleep(0.002)
            seconds = load.stop().seconds[mark : mark + count]
            found.append(2 * GEMM_M**3 / (sum(seconds) / len(seconds)) / 1e12)
    finally:
        load.release()
    return found


def peer_copy_gbps(nbytes: int, repeats: int = 7) -> float:
    """`cudaMemcpyPeer` of `nbytes`, GPU 0 -> GPU 1, timed by CUDA events on GPU 0: the median GB/s."""
    import cupy

    with cupy.cuda.Device(0):
        src = cupy.ones(nbytes, dtype=cupy.uint8)
    with cupy.cuda.Device(1):
        dst = cupy.zeros(nbytes, dtype=cupy.uint8)
    found = []
    with cupy.cuda.Device(0):
        if cupy.cuda.runtime.deviceCanAccessPeer(0, 1):  # else the copy is staged through the host
            try:
                cupy.cuda.runtime.deviceEnablePeerAccess(1)
            except cupy.cuda.runtime.CUDARuntimeError:
                pass  # enabled already
        for _ in range(repeats + 1):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            cupy.cuda.runtime.memcpyPeer(dst.data.ptr, 1, src.data.ptr, 0, nbytes)
            end.record()
            end.synchronize()
            found.append(nbytes / (cupy.cuda.get_elapsed_time(start, end) / 1e3) / 1e9)
    return median(found[1:])


def run_lists(args: argparse.Namespace, out: Path) -> float:
    """The run of every path and carve-out beside the GEMM; its wall seconds."""
    command = [
        sys.executable, "-m", "rdmabench", "run", "--np", "2", "--test", "put", "--mode", "device",
        "--blocks", str(args.blocks), "--block-size", args.sizes, "--layout", "random", "--posting", "all",
        "--beside", f"gemm:{GEMM_M},carveout={args.carveout}", "--output", str(out),
    ]  # fmt: skip
    print("#", " ".join(command[2:]), flush=True)
    began = time.monotonic()
    with subprocess.Popen(command) as run:
        try:
            run.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:  # stopped as a user's Ctrl-C would: its ranks too, its partial file kept
            run.send_signal(signal.SIGINT)
            try:
                run.wait(timeout=30)
            except subprocess.TimeoutExpired:
                run.kill()
            sys.exit(f"besidebench: the run took more than its {args.timeout:g} s (--timeout) and was stopped")
    return time.monotonic() - began


def points(doc: ResultsDocument) -> list[dict[str, Any]]:
    """One point per block-list entry beside compute: its size, path, carve-out and costs."""
    found = []
    for entry in doc.get("results", []):
        blocks, beside = entry.get("blocks") or {}, entry.get("beside") or {}
        if not beside or not blocks:
            continue
        gpu0 = (beside.get("gpus") or {}).get("0") or {}  # the reference GEMM runs on GPU 0
        found.append(
            {
                "block": blocks.get("block_bytes") or entry.get("block_bytes"),
                "path": blocks.get("posted_by", "?"),
                "carveout": beside.get("carveout") or 0,
                "gbps": entry.get("bandwidth_gbps", entry.get("value")),
                "alone_gbps": beside.get("transfer_alone"),
                "slowdown": beside.get("slowdown"),
                "range": beside.get("slowdown_range"),
                "interval": beside.get("slowdown_interval"),
                "noise": beside.get("noise_floor"),
                "used": beside.get("pairs_used") or 0,
                "sustained": blocks.get("sustained_gbps"),
                "host_us": blocks.get("host_us_per_descriptor"),
                "duty": beside.get("duty"),
                "ms_per_gib": beside.get("model_ms_per_gib"),
                "drifting": len(beside.get("drifting_pairs") or []),
                "pairs": len(beside.get("slowdown_pairs") or []),
                "judged": beside.get("pairs") or 0,
                "drift": beside.get("alone_drift"),
                "carve_cost": beside.get("carveout_cost"),
                "gemm_alone": gpu0.get("alone"),
                "cpu_us": blocks.get("cpu_us_per_descriptor"),
            }
        )
    return found


def _f(value: Any, form: str) -> str:
    return "-" if value is None else format(value, form)


def judged(p: dict[str, Any]) -> str:
    """How many of a point's pairs the slowdown used, of how many were taken (the rest: low duty)."""
    return f"{p['used']}/{p['pairs']}"


def half_points(p: dict[str, Any]) -> float | None:
    """Half the width of a row's interval, in points of slowdown (None without one)."""
    low_high = p.get("interval")
    return (low_high[1] - low_high[0]) / 2 * 100 if low_high else None


def metric_checks(found: list[dict[str, Any]], gemm: list[float], wall: float, probe: dict[str, float] | None) -> None:
    """Issue 54's checks: every row's slowdown with an interval, at least 90% within +-2 points, the GPU
    path at 1 MiB on the whole GPU within 15% of the CUDA-event probe, the run under 180 s; and issue 44's
    of the metric itself: ce-batch at 1 MiB at most x1.03, the GEMM alone within 5% of the reference."""
    halves = [half_points(p) for p in found]
    with_interval = sum(h is not None for h in halves)
    within = sum(h is not None and h <= TARGET * 100 + 1e-9 for h in halves)
    share = within / len(found) if found else 0.0
    print(
        f"# metric: rows with a 95% interval: {with_interval} of {len(found)}: {'MET' if found and with_interval == len(found) else 'MISSED'}"
    )
    print(
        f"# metric: rows within +-{TARGET * 100:g} points: {within} of {len(found)} ({share:.0%}): at least "
        f"{WITHIN_SHARE:.0%}: {'MET' if share >= WITHIN_SHARE else 'MISSED'}"
    )
    at_1m = {(p["path"], p["carveout"]): p for p in found if p["block"] == 1 << 20}
    gpu, duty = at_1m.get(("gpu", 0), {}).get("slowdown"), at_1m.get(("gpu", 0), {}).get("duty")
    if gpu and duty and 1 / gpu - 1 + duty > 0:  # derived, not measured: what the row reads at a duty of 1
        full = duty / (1 / gpu - 1 + duty)
        print(
            f"# gpu at 1MiB (whole GPU) x{gpu:.3f} at duty {duty:.2f} would be x{full:.3f} kept in flight throughout, "
            "were the GEMM slowed only while a transfer is in flight (1/S = d/F + 1 - d: a model, not a measurement)"
        )
    if probe is not None:
        agree = gpu is not None and abs(gpu / probe["slowdown"] - 1) <= PROBE_AGREE
        print(
            f"# metric: gpu at 1MiB (whole GPU) x{_f(gpu, '.3f')} against the CUDA-event probe x{probe['slowdown']:.3f} "
            f"(its list {probe['gbps']:.1f} GB/s): within {PROBE_AGREE:.0%}: {'MET' if agree else 'MISSED'}"
        )
    else:
        print(f"# metric: gpu at 1MiB (whole GPU) x{_f(gpu, '.3f')}: no probe ran (--no-probe, or it failed above)")
    batch = at_1m.get(("ce-batch", 0), {}).get("slowdown")
    print(f"# metric: ce-batch at 1MiB x{_f(batch, '.3f')}: <= x1.03: {'MET' if batch and batch <= 1.03 else 'MISSED'}")
    refs = [p["gemm_alone"] / median(gemm) for p in found if p["gemm_alone"] and gemm]
    within_ref = all(abs(r - 1) <= 0.05 for r in refs)
    print(
        f"# metric: GEMM alone / reference {_f(min(refs, default=None), '.3f')}-{_f(max(refs, default=None), '.3f')}: "
        f"within 5%: {'MET' if refs and within_ref else 'MISSED'}"
    )
    drifting = sum(p["drifting"] for p in found)
    print(
        f"# pairs whose alone windows drifted past 3% (marked, judged): {drifting} of {sum(p['pairs'] for p in found)}"
    )
    print(f"# time: the run took {wall:.0f} s: under {RUN_SECONDS:g} s: {'MET' if wall < RUN_SECONDS else 'MISSED'}")


def row_line(p: dict[str, Any], gemm: list[float]) -> str:
    """One row of the table."""
    interval = "[" + "-".join(f"{v:.3f}" for v in p["interval"]) + "]" if p["interval"] else "-"
    noise = None if p["noise"] is None else p["noise"] * 100
    ref = p["gemm_alone"] / median(gemm) if p["gemm_alone"] and gemm else None
    return (
        f"{format_size(p['block'] or 0):>7}  {p['path']:<9} {p['carveout']:>5} {_f(p['gbps'], '.1f'):>7} "
        f"{_f(p['sustained'], '.1f'):>7} {_f(p['alone_gbps'], '.1f'):>6}  {_f(p['slowdown'], '.3f'):>6} {interval:<14}"
        f"{_f(half_points(p), '.1f'):>5} {_f(noise, '.1f'):>5} {judged(p):>5}  {_f(p['duty'], '.2f'):>5} "
        f"{_f(p['drift'], '+.3f'):>6}  {_f(p['carve_cost'], '.3f'):>6}  {_f(ref, '.3f'):>6}  {_f(p['host_us'], '.3f'):>8}"
        f"  {_f(p['ms_per_gib'], '.2f'):>7}"
    )


def report(found: list[dict[str, Any]], gemm: list[float], peer: dict[int, float]) -> None:
    print(f"# GEMM alone, 40 back-to-back by CUDA events: {' '.join(f'{v:.0f}' for v in gemm)} TFLOP/s")
    print(
        "# GB/s: the burst (timed steps); sust: one posting thread back to back; slowdown [95% interval], +-pts its "
        "half-width and floor the load's own (points), used/pairs: pairs used of those taken; host us: a descriptor"
    )
    print(
        "  block  path       carve   GB/s    sust  alone  slowdown [interval]  +-pts floor  used  duty  drift  "
        "carve  gemm/ref  host us  ms/GiB"
    )
    for p in sorted(found, key=lambda p: (p["block"] or 0, p["path"], p["carveout"])):
        print(row_line(p, gemm))
    for block, path, floor, most in TARGETS:
        fits = [
            p
            for p in found
            if p["block"] == block
            and (p["path"] == path and not p["carveout"] if path != "carveout" else p["carveout"])
            and p["slowdown"] is not None
            and p["slowdown"] <= most
        ]
        best = max(fits, key=lambda p: p["gbps"] or 0.0, default=None)
        said = f"{best['gbps']:.1f} GB/s at x{best['slowdown']:.3f}" if best else "none within the slowdown"
        met = best is not None and (best["gbps"] or 0.0) >= floor
        print(
            f"# target {format_size(block)} {path}: >= {floor:g} GB/s at <= x{most}: {said}: {'MET' if met else 'MISSED'}"
        )
    for block, gbps in peer.items():
        best = max(
            (p for p in found if p["block"] == block and (p["slowdown"] or 9) <= 1.02),
            key=lambda p: p["gbps"] or 0,
            default=None,
        )
        share = (best["gbps"] or 0) / gbps if best else None
        print(
            f"# {format_size(block)}: cudaMemcpyPeer of the list's bytes {gbps:.1f} GB/s; best at <= x1.02: {_f(share, '.3f')} of it"
        )


def run_probe(blocks: int) -> dict[str, float] | None:
    """The CUDA-event probe of the GPU path at 1 MiB on the whole GPU beside the GEMM (its line printed);
    None where it failed (said on stderr: the run's figures stand without it)."""
    from devtools.probes.gpusustained import line, probe

    try:
        found = probe(1 << 20, blocks, 3.0, GEMM_M)
    except (Exception, SystemExit) as exc:  # a probe that fails leaves the benchmark's own figures standing
        print(f"# probe failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    finally:
        _free_pools()
    print(f"# {line(found, 1 << 20)}", flush=True)
    return {"slowdown": found.slowdown, "gbps": found.gbps}


def _free_pools() -> None:
    """The probe's pools given back on both GPUs, before the run's ranks allocate theirs."""
    try:
        import cupy

        for device in range(min(2, cupy.cuda.runtime.getDeviceCount())):
            with cupy.cuda.Device(device):
                cupy.get_default_memory_pool().free_all_blocks()
    except Exception:  # no CuPy or no GPU: nothing was held
        return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4KiB,64KiB,1MiB")
    parser.add_argument("--blocks", type=int, default=1024)
    parser.add_argument("--carveout", default="all")
    parser.add_argument("--timeout", type=float, default=400.0)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--no-probe", action="store_true", help="leave out the CUDA-event probe (about 12 s)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    gemm = gemm_reference()
    peer = {
        size: peer_copy_gbps(size * args.blocks)
        for size in (parse_size(s) for s in args.sizes.split(","))
        if size >= 1 << 20
    }
    probe = None if args.no_probe else run_probe(args.blocks)
    out = args.out / "besidebench.json"
    wall = run_lists(args, out)
    print(f"# the run took {wall:.0f} s")
    if not out.exists():
        print("# no results file: the run failed (its output above says why)")
        return
    found = points(load_results(str(out)))
    report(found, gemm, peer)
    metric_checks(found, gemm, wall, probe)


if __name__ == "__main__":
    main()
