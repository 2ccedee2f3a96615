"""rdmabench against NIXL, side by side (`rdmabench anchor --against nixl`): the same block lists
(blocks.py shapes, or a model's handoff: kvhandoff.py) moved on this machine by NIXL's UCX backend,
as inference engines (vLLM, Dynamo, SGLang) move KV caches, and by rdmabench, in one call.

For each list (operation, count, layout, block size) a round runs NIXL (two processes of its own:
nixl_agent.py; NIXL bundles a UCX build of its own, so it never shares a process with the libucx
wheel), then `rdmabench run` with payload validation off and then on, then NIXL again: NIXL's figure
is the mean of its runs before and after, and their difference (drift) says whether the machine held
still in between. Each ratio is taken within its round; --repeat gives the rounds' medians and
spread (rounds.rounds_median). Both sides report per transfer: GB/s at the median transfer (its bytes
over its p50 time), p50/p99/p99.9, the median transfer's share spent posting, descriptors a second,
CPU seconds per GB at the initiator, the list against one contiguous message of the same bytes, the
cold costs (registration, metadata or key exchange, preparing the lists, the first transfer), and
the UCX protocol each chose (UCX_PROTO_INFO=y in both).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import privatedirs
from ..errors import ConfigError, LaunchError, RdmabenchError, ValidationError
from ..hardware.gpu import gpu_unavailable_reason, visible_gpu_count
from ..measure.blocks import POSTINGS, BlockShape, parse_layout
from ..measure.kvhandoff import Handoff
from ..pystart import python_module
from ..units import format_size
from ..wire import protoinfo
from .nixl_agent import NIXL_PACKAGES, PLAN, read_file, write_json
from .rounds import DRIFT_LIMIT, repeated, round_lines, rounds_median, run_entries, spread

OPERATIONS = {"put": "WRITE", "get": "READ"}  # rdmabench's test -> NIXL's operation
MEMORY = {"host": ("DRAM", "pageable"), "device": ("VRAM", "device")}  # --mode -> (NIXL's, rdmabench's)
SCRATCH_PREFIX = "rdmabench-nixl-"
INSTALL = "pip install --no-deps nixl-cu13 (rdmabench's nixl extra)"
KEY = ("test", "mode", "case", "size_bytes")
# A row's numbers that say what was measured, not what it measured: no median of them.
SHAPE = ("count", "regions", "transfer_bytes", "nixl_threads")
STEADY = (("GB/s", "ratio_gbps"), ("p99", "ratio_p99"))


def missing() -> str | None:
    """Why NIXL cannot run here (its Python package is not installed), or None."""
    if any(importlib.util.find_spec(package) for package in NIXL_PACKAGES):
        return None
    return f"NIXL is not installed here: {INSTALL}"


@dataclass(frozen=True)
class NixlPlan:
    """What to compare: block sizes x counts x layouts x tests, in host or device memory; or, with
    `handoff`, a model's descriptor list (its own count and size) in each layout."""

    sizes: tuple[int, ...] = (4096, 65536, 1 << 20)
    counts: tuple[int, ...] = (1024,)
    layouts: tuple[str, ...] = ("random",)
    tests: tuple[str, ...] = ("put",)
    mode: str = "host"
    handoff: Handoff | None = None
    threads: int = 0  # NIXL's UCX backend threads (num_threads; vLLM's connector passes 4); 0: NIXL's default
    posting: str = "auto"  # who posts rdmabench's device lists (run's --posting)
    seconds: float = 1.0  # of NIXL's timed transfers per list (and as many of its contiguous reference)
    samples: int = 5  # rdmabench's: samples of sample_time seconds, about as many transfers' time
    sample_time: float = 0.2
    timeout: float = 600.0  # one NIXL pair, start to end

    def check(self) -> NixlPlan:
        reason = missing()
        if reason:
            raise ConfigError(reason)
        if self.threads < 0:
            raise ConfigError(f"--nixl-threads must be 0 (NIXL's default) or more, not {self.threads}")
        if self.mode not in MEMORY:
            raise ConfigError(f"unknown anchor mode {self.mode!r}: choose host or device")
        if self.posting not in POSTINGS:
            raise ConfigError(f"unknown --posting {self.posting!r}: choose one of {', '.join(POSTINGS)}")
        if self.posting != "auto" and self.mode != "device":
            raise ConfigError("--posting chooses who posts lists of device memory: add --mode device")
        if self.mode == "device" and visible_gpu_count() == 0:
            raise ConfigError(f"device memory needs a GPU: {gpu_unavailable_reason()}")
        for test in self.tests:
            if test not in OPERATIONS:
                raise ConfigError(f"the NIXL anchor compares put (WRITE) and get (READ), not {test!r}")
        for layout in self.layouts:
            parse_layout(layout)  # runs:MEAN too: NIXL posts the same slots
        for shape, sizes in self.lists():
            for size in sizes:
                shape.check_fits(size)
        return self

    def lists(self) -> list[tuple[BlockShape, tuple[int, ...]]]:
        """Each block list and the block sizes it is measured at."""
        if self.handoff is not None:
            return [(self.handoff.shape(layout), (self.handoff.block_bytes,)) for layout in self.layouts]
        return [(BlockShape(count, layout).check(), self.sizes) for count in self.counts for layout in self.layouts]


@dataclass
class _Case:
    test: str
    shape: BlockShape
    sizes: tuple[int, ...]
    label: str
    handoff: Handoff | None = None
    model_file: str | None = None  # the handoff's model, written for rdmabench run's --model
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)


def compare(plan: NixlPlan, repeat: int = 1, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Rows of (test, mode, list, size): NIXL's and rdmabench's figures and their ratios, side by side;
    with `repeat` > 1 each row holds the rounds' medians (and `runs`, every round's figures)."""
    if repeat < 1:
        raise ConfigError(f"--repeat must be at least 1, not {repeat}")
    plan.check()
    privatedirs.sweep_stale(SCRATCH_PREFIX)
    folder = privatedirs.scratch_dir(SCRATCH_PREFIX)
    try:
        return repeated(lambda: _round(plan, folder, progress), repeat, median_rows, progress, "NIXL anchor", True)
    except OSError as exc:  # the private folder gone from under it (removed, or moved), say
        raise LaunchError(f"the NIXL anchor stopped: {exc.strerror or exc} ({exc.filename or folder})") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def median_rows(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rounds' rows as one: each measured figure's median (rounds.rounds_median), the steady rounds'
    ratios beside them."""
    figures = sorted(
        {
            name
            for row in rounds[0]
            for name, value in row.items()
            if name not in KEY + SHAPE and isinstance(value, (int, float)) and not isinstance(value, bool)
        }
    )
    return rounds_median(rounds, KEY, tuple(figures), ("transport", "nixl_transport"), "nixl_drift", STEADY)


def _cases(plan: NixlPlan, folder: Path) -> list[_Case]:
    cases = []
    model_file = None
    if plan.handoff is not None:
        model_file = str(folder / "model.json")
        if not os.path.exists(model_file):
            write_json(folder, "model.json", plan.handoff.model.to_dict())
    for test in plan.tests:
        for shape, sizes in plan.lists():
            label = f"{shape.count} {shape.layout}"
            if plan.handoff is not None:
                label = f"{plan.handoff.model.name} {plan.handoff.kv_layout} {plan.handoff.prompt} tok, {shape.layout}"
            cases.append(_Case(test, shape, sizes, label, plan.handoff, model_file))
    return cases


def _round(plan: NixlPlan, folder: Path, progress: Callable[[str], None] | None) -> list[dict[str, Any]]:
    """One round of every list: NIXL, rdmabench unchecked, rdmabench checked, NIXL again."""
    rows: list[dict[str, Any]] = []
    for case in _cases(plan, folder):
        if progress is not None:
            progress(f"  {case.test} {case.label}: NIXL, rdmabench unchecked and checked, NIXL")
        before = {size: run_pair(case.test, case.shape, size, plan, folder) for size in case.sizes}
        unchecked = run_blocks(case, plan, validate=False)
        checked = run_blocks(case, plan, validate=True)
        after = {size: run_pair(case.test, case.shape, size, plan, folder) for size in case.sizes}
        rows.extend(
            _row(case, plan.mode, plan.threads, size, before[size], after[size], unchecked[size], checked[size])
            for size in case.sizes
        )
    return rows


# --- NIXL's side: a pair of processes ---------------------------------------------------------------


def run_pair(test: str, shape: BlockShape, size: int, plan: NixlPlan, parent: Path) -> dict[str, Any]:
    """One NIXL target and initiator on this machine moving `shape` at `size`: their results, and the
    UCX protocol the initiator's UCX reported (UCX_PROTO_INFO=y, into a log in the private folder)."""
    folder = privatedirs.scratch_dir("pair-", parent)
    pair = {
        "operation": OPERATIONS[test], "memory": MEMORY[plan.mode][0], "size": size, "seconds": plan.seconds,
        "shape": {"count": shape.count, "layout": shape.layout, "batch": 1, "pool_bytes": shape.pool_bytes,
                  "regions": shape.regions},
        "warmup": 2, "min_transfers": 5, "max_transfers": 100_000, "timeout": plan.timeout, "threads": plan.threads,
    }  # fmt: skip
    write_json(folder, PLAN, pair)
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for role in ("target", "initiator"):
            processes[role] = _start(role, folder, plan.mode, test)
        _wait(processes, folder, plan.timeout)
        results: dict[str, Any] = {role: json.loads(read_file(folder, f"{role}.result.json")) for role in processes}
    finally:
        for process in processes.values():  # only ours, by their own handles
            if process.poll() is None:
                process.kill()
            process.wait()
    wrong = results["initiator"].get("wrong_blocks") or results["target"].get("wrong_blocks")
    if wrong:
        raise ValidationError(
            f"NIXL's {OPERATIONS[test]} of {shape.describe()} at {format_size(size)} left {wrong} block(s) wrong"
        )
    results["transport"] = transport_of(_text(folder / "ucx-initiator.log"), test, size)
    shutil.rmtree(folder, ignore_errors=True)
    return results


def _start(role: str, folder: Path, mode: str, test: str) -> subprocess.Popen[bytes]:
    """A NIXL end in a process of its own, its UCX reporting the protocols it chose into the folder."""
    env = dict(os.environ)
    env["UCX_PROTO_INFO"], env["UCX_LOG_FILE"] = "y", str(folder / f"ucx-{role}.log")
    if mode == "device" and visible_gpu_count() >= 2:
        # As rdmabench's ranks: the link's source on the first GPU, its destination on the second.
        visible = env.get("CUDA_VISIBLE_DEVICES")
        devices = visible.split(",") if visible else ["0", "1"]
        source = (role == "initiator") == (OPERATIONS[test] == "WRITE")
        env["CUDA_VISIBLE_DEVICES"] = devices[0 if source else 1]
    output = privatedirs.open_in_private_dir(folder / f"{role}.out", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        return subprocess.Popen(
            python_module("rdmabench.anchor.nixl_agent", role, str(folder)),
            env=env, stdout=output, stderr=output, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        os.close(output)


def _wait(processes: dict[str, subprocess.Popen[bytes]], folder: Path, timeout: float) -> None:
    """Until both ends exit; LaunchError with the failing end's own line as soon as one fails."""
    deadline = time.monotonic() + timeout
    while True:
        codes = {role: process.poll() for role, process in processes.items()}
        for role, code in codes.items():
            if code not in (None, 0):
                raise LaunchError(f"NIXL's {role} failed: {_last_line(folder / f'{role}.out')}")
        if all(code == 0 for code in codes.values()):
            return
        if time.monotonic() > deadline:
            raise LaunchError(f"NIXL's target and initiator did not finish in {timeout:.0f} s")
        time.sleep(0.02)


def _text(path: Path) -> str:
    try:
        return read_file(path.parent, path.name).decode(errors="replace")
    except (OSError, RdmabenchError):  # missing, or not ours to trust: no protocol to report
        return ""


def _last_line(path: Path) -> str:
    lines = [line for line in _text(path).splitlines() if line.strip()]
    mine = [line for line in lines if line.startswith("nixl ")]
    return (mine or lines or ["(no output)"])[-1].strip()[-300:]


def transport_of(log: str, test: str, size: int) -> str | None:
    """What UCX reported for `test`'s one-sided operation at `size` in a process's log: "transport
    (protocol)" of the last table of the operation (a variant's name appended: "(multi)")."""
    operation = protoinfo.RMA_PUT if test == "put" else protoinfo.RMA_GET
    tables = [t for t in protoinfo.parse_tables(log) if t.operation.startswith(operation)]
    for table in reversed(tables):
        row = table.lookup(size)
        if row is not None:
            variant = table.operation[len(operation) :].strip().strip("()")
            return f"{row.transport} ({row.protocol}{', ' + variant if variant else ''})"
    return None


# --- rdmabench's side -------------------------------------------------------------------------------


def run_blocks(case: _Case, plan: NixlPlan, validate: bool) -> dict[int, dict[str, Any]]:
    """rdmabench's block-list entry per size of one `rdmabench run` of the case's list."""
    options = ["--test", case.test, "--mode", MEMORY[plan.mode][1], "--layout", case.shape.layout]
    if case.handoff is not None and case.model_file is not None:
        handoff = case.handoff
        options += ["--model", case.model_file, "--kv-layout", handoff.kv_layout, "--prompt", str(handoff.prompt)]
    else:
        options += ["--blocks", str(case.shape.count), "--block-size", ",".join(str(size) for size in case.sizes)]
    if not validate:
        options.append("--no-validate")
    if plan.posting != "auto":
        options += ["--posting", plan.posting]
    found = {}
    for entry in run_entries(options, samples=plan.samples, sample_time=plan.sample_time):
        blocks = entry.get("blocks") or {}
        if blocks.get("count") == case.shape.count and entry["size_bytes"] in case.sizes:
            found[entry["size_bytes"]] = entry  # (a list of one contiguous block is its own reference)
    missing_sizes = [size for size in case.sizes if size not in found]
    if missing_sizes:
        raise LaunchError(f"rdmabench run measured no block list of {case.label} at {missing_sizes}")
    return found


# --- the rows -------------------------------------------------------------------------------------

# Per transfer, as both sides report them: the block record's field -> the row's suffix.
_PER_TRANSFER = {
    "transfer_gbps_p50": "gbps", "post_share_p50": "post_share", "descriptors_per_second_p50": "descriptors_per_s",
    "transfers": "transfers",
}  # fmt: skip
_PERCENTILES = {"p50": "p50_us", "p99": "p99_us", "p99.9": "p999_us"}


def _row(
    case: _Case,
    mode: str,
    threads: int,
    size: int,
    before: dict[str, Any],
    after: dict[str, Any],
    unchecked: dict[str, Any],
    checked: dict[str, Any],
) -> dict[str, Any]:
    """One list at one size: NIXL's figures (the mean of its runs before and after rdmabench's),
    rdmabench's unchecked and checked, and the ratios taken in this round."""
    shape = case.shape
    row: dict[str, Any] = {
        "test": case.test, "nixl_operation": OPERATIONS[case.test], "mode": mode, "case": case.label,
        "size_bytes": size, "count": shape.count, "layout": shape.layout, "regions": shape.regions,
        "transfer_bytes": shape.count * size,
    }  # fmt: skip
    if case.handoff is not None:
        row["handoff"] = case.handoff.record()
    row["nixl_threads"] = threads
    row |= _nixl_figures(before, after) | _rdmabench_figures(unchecked, case.test)
    record = checked["blocks"]
    row["checked_gbps"], row["checked_p99_us"] = record["transfer_gbps_p50"], record["transfer_us"]["p99"]
    row["ratio_gbps"] = row["rdmabench_gbps"] / row["nixl_gbps"]
    row["ratio_p99"] = row["rdmabench_p99_us"] / row["nixl_p99_us"]
    row["validation_share"] = row["checked_gbps"] / row["rdmabench_gbps"]  # of the unchecked GB/s, kept checked
    if row.get("ceiling_gbps"):
        row["nixl_of_ceiling"] = row["nixl_gbps"] / row["ceiling_gbps"]
        row["rdmabench_of_ceiling"] = row["rdmabench_gbps"] / row["ceiling_gbps"]
    row["transport"] = f"{unchecked.get('transport')} ({unchecked.get('protocol')})"
    row["nixl_transport"] = " | ".join(dict.fromkeys(str(run.get("transport")) for run in (before, after)))
    return row


def _nixl_figures(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """NIXL's figures, each the mean of its two runs; its GB/s of each run and their drift."""
    runs = (before, after)
    out: dict[str, Any] = {}
    for field_name, suffix in _PER_TRANSFER.items():
        out[f"nixl_{suffix}"] = _mean(run["initiator"]["blocks"][field_name] for run in runs)
    for quantile, suffix in _PERCENTILES.items():
        out[f"nixl_{suffix}"] = _mean(run["initiator"]["blocks"]["transfer_us"][quantile] for run in runs)
    out["nixl_make_us"] = _mean(run["initiator"]["blocks"]["make_us_p50"] for run in runs)
    out["nixl_cpu_s_per_gb"] = _mean(run["initiator"]["blocks"]["cpu_s_per_gb"] for run in runs)
    out["nixl_vs_one"] = _mean(
        run["initiator"]["blocks"]["transfer_gbps_p50"] / run["initiator"]["reference"]["transfer_gbps_p50"]
        for run in runs
    )
    out["nixl_before"], out["nixl_after"] = (run["initiator"]["blocks"]["transfer_gbps_p50"] for run in runs)
    out["nixl_drift"] = abs(out["nixl_after"] - out["nixl_before"]) / max(out["nixl_gbps"], 1e-12)
    for name in before["initiator"]["cold_s"]:
        out[f"nixl_cold_{name}_s"] = _mean(run["initiator"]["cold_s"][name] for run in runs)
    for name in ("register_s", "metadata_s"):  # the target's own: the memory the initiator moves into or out of
        out[f"nixl_cold_target_{name}"] = _mean(run["target"][name] for run in runs)
    told = [run["initiator"]["blocks"].get("nixl_telemetry") for run in runs]
    if all(told):  # NIXL's own clock of its C++ path, without Python's, and the descriptors it posted
        out["nixl_own_post_us"] = _mean(t["post_us_p50"] for t in told)  # type: ignore[index]
        out["nixl_own_transfer_us"] = _mean(t["transfer_us_p50"] for t in told)  # type: ignore[index]
        out["nixl_descriptors_posted"] = _mean(t["descriptors_posted"] for t in told)  # type: ignore[index]
    return out


def _rdmabench_figures(entry: dict[str, Any], test: str) -> dict[str, Any]:
    """rdmabench's figures of one run (validation off): its block record's, and the initiator's CPU."""
    record = entry["blocks"]
    out: dict[str, Any] = {f"rdmabench_{suffix}": record[name] for name, suffix in _PER_TRANSFER.items()}
    out |= {f"rdmabench_{suffix}": record["transfer_us"][quantile] for quantile, suffix in _PERCENTILES.items()}
    out["rdmabench_step_gbps"] = entry["bandwidth_gbps"]  # all bytes over the step's time, samples' median
    cpu = entry.get("cpu_s_per_gb") or {}
    out["rdmabench_cpu_s_per_gb"] = cpu.get("src" if test == "put" else "dst")
    out["rdmabench_vs_one"] = record.get("share_of_contiguous")
    out["rdmabench_posted_by"] = record.get("posted_by", "cpu")
    if record.get("ceiling_gbps"):  # the GPU's own copy of the list: each side's per-transfer GB/s against it
        out["ceiling_gbps"] = record["ceiling_gbps"]
    for name, seconds in (record.get("cold_s") or {}).items():
        out[f"rdmabench_cold_{name}_s"] = seconds
    return out


def _mean(values: Any) -> float:
    found = [float(value) for value in values]
    return sum(found) / len(found)


# --- the table ------------------------------------------------------------------------------------


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = [
        "# rdmabench against NIXL (UCX backend), the same block lists side by side in this run, payload validation "
        "off on both; per transfer: GB/s = its bytes / the median transfer's time, p99 = the 99th percentile of "
        "transfer times (us)",
        "# NIXL: two processes of its own, a request per transfer (make_prepped_xfer, transfer(), check_xfer_state "
        "to DONE); its figures are the mean of its runs just before and just after rdmabench's; drift = their "
        f"difference (over {DRIFT_LIMIT:.0%} (!): the machine changed speed, the row's ratios are unreliable)",
        "# ratio = rdmabench / NIXL: GB/s (1 or more: rdmabench at least as fast), p99 (1 or less: a tail no longer); "
        "checked = rdmabench validating every block, as a share of its unchecked GB/s",
        "# post = the median transfer's share spent posting; desc/s = descriptors a second; CPU = the initiator's "
        "CPU s/GB; vs one = GB/s against one contiguous message of the same bytes (N = NIXL, R = rdmabench); "
        "of ceil = GB/s against the GPU's own copy of the same list (device memory); by = who posted rdmabench's "
        "list (gpu: UCX's device API; cpu: a request per block, as NIXL)",
        f"{'test':<4} {'mode':<6} {'list':<26} {'block':>7} {'NIXL GB/s':>9} {'GB/s':>8} {'ratio':>6} "
        f"{'NIXL p99':>9} {'p99 us':>9} {'ratio':>6} {'checked':>7} {'post N/R':>11} {'desc/s N/R':>15} "
        f"{'CPU N/R':>11} {'vs one N/R':>11} {'of ceil N/R':>11} {'by':>3} {'drift':>6}  transport: rdmabench | NIXL",
    ]
    for r in rows:
        lines.append(
            f"{r['test']:<4} {r['mode']:<6} {r['case'][:26]:<26} {format_size(r['size_bytes']):>7} "
            f"{r['nixl_gbps']:>9.3f} {r['rdmabench_gbps']:>8.3f} {r['ratio_gbps']:>6.2f} {r['nixl_p99_us']:>9.1f} "
            f"{r['rdmabench_p99_us']:>9.1f} {r['ratio_p99']:>6.2f} {r['validation_share']:>7.2f} "
            f"{_pair(r, 'post_share', '.2f'):>11} {_pair(r, 'descriptors_per_s', '.3g'):>15} "
            f"{_pair(r, 'cpu_s_per_gb', '.2g'):>11} {_pair(r, 'vs_one', '.2f'):>11} {_pair(r, 'of_ceiling', '.3f'):>11} "
            f"{r.get('rdmabench_posted_by', 'cpu'):>3} {_drift(r):>6}  "
            f"{r['transport']} | {r['nixl_transport']}"
        )
    lines.append("# cold, seconds (before the warm transfers; NIXL: the mean of its two runs):")
    lines += [_cold_line(r) for r in rows]
    told = [r for r in rows if r.get("nixl_own_transfer_us") is not None]
    if told:
        lines.append(
            "# NIXL's own telemetry of its median transfer (its C++ clock, Python's polling left out), the "
            f"descriptors it posted after merging neighbours, and its UCX backend's threads ({int(rows[0]['nixl_threads'])}: "
            "0 = NIXL's default):"
        )
        lines += [
            f"#   {r['test']} {r['case']} {format_size(r['size_bytes'])}: posting {r['nixl_own_post_us']:.1f} us, "
            f"transfer {r['nixl_own_transfer_us']:.1f} us, {r['nixl_descriptors_posted']:.0f} of {int(r['count'])} "
            "descriptors posted"
            for r in told
        ]
    lines += round_lines(rows, _round_heading, _round_line)
    return "\n".join(lines)


def _pair(row: dict[str, Any], name: str, spec: str) -> str:
    values = [row.get(f"{side}_{name}") for side in ("nixl", "rdmabench")]
    return "/".join("-" if value is None else format(value, spec) for value in values)


def _drift(row: dict[str, Any]) -> str:
    text = f"{row['nixl_drift']:.0%}"
    return text + ("!" if (row.get("rounds") or 1) == 1 and row["nixl_drift"] > DRIFT_LIMIT else "")


def _cold_line(row: dict[str, Any]) -> str:
    def part(side: str) -> str:
        prefix = f"{side}_cold_"
        found = [(name[len(prefix) : -2], value) for name, value in row.items() if name.startswith(prefix)]
        return " ".join(f"{name} {value:.3g}" for name, value in found if isinstance(value, (int, float)))

    where = f"{row['test']} {row['case']} {format_size(row['size_bytes'])}"
    return f"#   {where}: NIXL {part('nixl')}; rdmabench {part('rdmabench')}"


def _round_heading(repeated: list[dict[str, Any]]) -> str:
    return (
        f"# every figure above is the median of {repeated[0]['rounds']} rounds, each ratio the median of the rounds' "
        "ratios (each taken within its round); min-max over the rounds (every round's figures: the JSON's `runs`); "
        f"steady rounds: NIXL's two runs within {DRIFT_LIMIT:.0%} of each other, and the ratios' median over them:"
    )


def _round_line(r: dict[str, Any]) -> str:
    steady = ", ".join(
        f"{name} {r[f'steady_{ratio}']:.2f}" for name, ratio in STEADY if r.get(f"steady_{ratio}") is not None
    )
    return (
        f"{r['test']:<4} {r['case'][:26]:<26} {format_size(r['size_bytes']):>7} GB/s ratio "
        f"{spread(r, 'ratio_gbps')}  p99 ratio {spread(r, 'ratio_p99')}  NIXL GB/s {spread(r, 'nixl_gbps')}"
        f"  rdmabench GB/s {spread(r, 'rdmabench_gbps')}  steady rounds {r.get('steady_rounds', 0)} of "
        f"{r['rounds']}" + (f": {steady}" if steady else "")
    )


def document(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The rows as the JSON document `anchor --against nixl -o` writes."""
    return {"schema": {"name": "rdmabench-anchor", "version": 1}, "against": "nixl", "rows": rows}
