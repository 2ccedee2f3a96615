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
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .. import privatedirs
from ..errors import ConfigError, LaunchError, RdmabenchError, ValidationError
from ..hardware.gpu import gpu_unavailable_reason, visible_gpu_count
from ..measure.beside import Beside, BesideLoads
from ..measure.blockrecord import KEY as BLOCKS
from ..measure.blockrecord import BlockList
from ..measure.blocks import BlockShape, parse_layout
from ..measure.kvhandoff import Handoff
from ..measure.postings import AUTO, parse_postings
from ..pystart import python_module
from ..units import format_size
from ..wire import protoinfo
from .nixl_agent import NIXL_PACKAGES
from .nixl_beside import beside_figures
from .nixl_files import PLAN, AgentPlan, PairRun, mean, read_file, throughput, write_json
from .nixl_row import NixlFigures, NixlRow, with_cold
from .nixl_table import STEADY
from .rounds import figure, repeated, rounds_median, run_document

OPERATIONS = {"put": "WRITE", "get": "READ"}  # rdmabench's test -> NIXL's operation
MEMORY = {"host": ("DRAM", "pageable"), "device": ("VRAM", "device")}  # --mode -> (NIXL's, rdmabench's)
SCRATCH_PREFIX = "rdmabench-nixl-"
INSTALL = "pip install --no-deps nixl-cu13 (rdmabench's nixl extra)"
KEY = ("test", "mode", "case", "size_bytes", "rdmabench_posted_by", "nixl_variant")
# How NIXL's UCX backend posts a list: its rows, each beside every rdmabench path of the same list.
NIXL_VARIANTS = {
    "default": "a request per transfer, every descriptor posted on its own (NIXL's default)",
    "sgl": "NIXL_UCX_SGL_ENABLE=1: a transfer's descriptors posted as one scatter-gather list (UCX 1.22's, "
    "which NIXL bundles; in software where the transport has none)",
}
_SGL_ENV = "NIXL_UCX_SGL_ENABLE"
_AGENT_SHARE = 0.9  # of the pair's time an end may take: it gives up first, saying where it waited
# A row's numbers that say what was measured, not what it measured: no median of them.
SHAPE = ("count", "regions", "transfer_bytes", "nixl_threads")


def missing() -> str | None:
    """Why NIXL cannot run here (its Python package is not installed), or None."""
    if any(importlib.util.find_spec(package) for package in NIXL_PACKAGES):
        return None
    return f"NIXL is not installed here: {INSTALL}"


def _check_beside(mode: str) -> None:
    """--beside runs a load on each end's own GPU: device memory, two GPUs, the load's library built
    here once (before any end starts, so no cold cost holds its build)."""
    if mode != "device":
        raise ConfigError("--beside runs a compute load on the GPUs that move the list: add --mode device")
    gpus = visible_gpu_count()
    if gpus < 2:
        raise ConfigError(
            f"--beside needs two GPUs, one for each end and its load (this machine shows {gpus}): two ends on "
            "one GPU would take turns, not run beside each other"
        )
    from ..wire import gpuload

    loaded = gpuload.load()
    if loaded.library is None:
        raise ConfigError(f"--beside: {loaded.note}")


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
    posting: str = "auto"  # who posts rdmabench's device lists (run's --posting: a path, a list, all)
    variants: tuple[str, ...] = tuple(NIXL_VARIANTS)  # how NIXL posts (NIXL_VARIANTS), a row each
    beside: BesideLoads | None = None  # a compute load on both GPUs while each side's transfers run (one carve-out)
    pairs: int = 5  # with beside: interleaved pairs (load alone, both at once) per NIXL run
    seconds: float = 1.0  # of NIXL's timed transfers per list (and as many of its contiguous reference)
    samples: int = 5  # rdmabench's: samples of sample_time seconds, about as many transfers' time
    sample_time: float = 0.2
    timeout: float = 600.0  # one NIXL pair, start to end (--nixl-timeout)

    @property
    def load(self) -> Beside | None:
        """The load both GPUs run beside the transfers (its one carve-out), or None."""
        return self.beside.first if self.beside is not None else None

    def check(self) -> NixlPlan:
        if self.beside is not None and len(self.beside.carveouts) > 1:  # NIXL's side carves no SMs
            raise ConfigError(
                f"--beside carveout={','.join(map(str, self.beside.carveouts))}: the NIXL anchor runs one load beside "
                "both sides (NIXL's posting takes no SMs to carve): give one carve-out, carveout=N"
            )
        reason = missing()
        if reason:
            raise ConfigError(reason)
        if self.threads < 0:
            raise ConfigError(f"--nixl-threads must be 0 (NIXL's default) or more, not {self.threads}")
        if self.mode not in MEMORY:
            raise ConfigError(f"unknown anchor mode {self.mode!r}: choose host or device")
        if parse_postings(self.posting) != (AUTO,) and self.mode != "device":
            raise ConfigError("--posting chooses who posts lists of device memory: add --mode device")
        for variant in self.variants:
            if variant not in NIXL_VARIANTS:
                raise ConfigError(f"unknown --nixl {variant!r}: choose {', '.join(NIXL_VARIANTS)} or a list of them")
        if not self.variants:
            raise ConfigError(f"--nixl needs at least one of {', '.join(NIXL_VARIANTS)}")
        if self.mode == "device" and visible_gpu_count() == 0:
            raise ConfigError(f"device memory needs a GPU: {gpu_unavailable_reason()}")
        if self.beside is not None:
            _check_beside(self.mode)
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
    skipped: dict[str, str] = field(default_factory=dict)  # posting paths rdmabench's run left out, and why
    rows: dict[int, NixlRow] = field(default_factory=dict)


def compare(plan: NixlPlan, repeat: int = 1, progress: Callable[[str], None] | None = None) -> list[NixlRow]:
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


def median_rows(rounds: list[list[NixlRow]], incomplete: str | None = None) -> list[NixlRow]:
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
    labels = ("transport", "nixl_transport")
    return rounds_median(rounds, KEY, tuple(figures), labels, "nixl_drift", STEADY, incomplete)


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


def _round(plan: NixlPlan, folder: Path, progress: Callable[[str], None] | None) -> list[NixlRow]:
    """One round of every list: NIXL, rdmabench unchecked, rdmabench checked, NIXL again."""
    rows: list[NixlRow] = []
    for case in _cases(plan, folder):
        if progress is not None:
            beside = f" beside {plan.load.label} on both GPUs" if plan.load is not None else ""
            progress(f"  {case.test} {case.label}{beside}: NIXL, rdmabench unchecked and checked, NIXL")
        before = _nixl_runs(case, plan, folder)
        unchecked = run_blocks(case, plan, validate=False)
        checked = run_blocks(case, plan, validate=True)
        after = _nixl_runs(case, plan, folder)
        for size in case.sizes:
            for path in unchecked[size]:  # each path rdmabench posted, beside each way NIXL posts
                if path not in checked[size]:  # auto chose otherwise in the two runs: no pair to compare
                    raise LaunchError(
                        f"rdmabench's checked run of {case.label} at {format_size(size)} was posted by "
                        f"{', '.join(checked[size])}, its unchecked run by {path}: run again, or name --posting"
                    )
                for variant in plan.variants:
                    key = (variant, size)
                    sides = (before[key], after[key], unchecked[size][path], checked[size][path])
                    rows.append(_row(case, plan, size, variant, *sides))
    return rows


def _nixl_runs(case: _Case, plan: NixlPlan, folder: Path) -> dict[tuple[str, int], PairRun]:
    """One NIXL pair per (variant, size) of the case."""
    return {
        (variant, size): run_pair(case.test, case.shape, size, plan, folder, variant)
        for variant in plan.variants
        for size in case.sizes
    }


# --- NIXL's side: a pair of processes ---------------------------------------------------------------


def run_pair(
    test: str, shape: BlockShape, size: int, plan: NixlPlan, parent: Path, variant: str = "default"
) -> PairRun:
    """One NIXL target and initiator on this machine moving `shape` at `size`, posting as `variant`
    says (NIXL_VARIANTS): their results, and the UCX protocol the initiator's UCX reported
    (UCX_PROTO_INFO=y, into a log in the private folder)."""
    folder = privatedirs.scratch_dir("pair-", parent)
    pair: AgentPlan = {
        "operation": OPERATIONS[test], "memory": MEMORY[plan.mode][0], "size": size, "seconds": plan.seconds,
        "shape": {"count": shape.count, "layout": shape.layout, "batch": 1, "pool_bytes": shape.pool_bytes,
                  "regions": shape.regions},
        "warmup": 2, "min_transfers": 5, "max_transfers": 100_000, "timeout": plan.timeout * _AGENT_SHARE, "threads": plan.threads,
        "beside": None if plan.load is None else {"load": plan.load.load, "size": plan.load.size},
        "pairs": plan.pairs,
    }  # fmt: skip
    write_json(folder, PLAN, pair)
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for role in ("target", "initiator"):
            processes[role] = _start(role, folder, plan.mode, test, variant)
        _wait(processes, folder, plan.timeout)
        target, initiator = (json.loads(read_file(folder, f"{role}.result.json")) for role in ("target", "initiator"))
    finally:
        for process in processes.values():  # only ours, by their own handles
            if process.poll() is None:
                process.kill()
            process.wait()
    wrong = initiator.get("wrong_blocks") or target.get("wrong_blocks")
    if wrong:
        raise ValidationError(
            f"NIXL's {OPERATIONS[test]} of {shape.describe()} at {format_size(size)} left {wrong} block(s) wrong"
        )
    transport = transport_of(_text(folder / "ucx-initiator.log"), test, size)
    shutil.rmtree(folder, ignore_errors=True)
    return {"target": target, "initiator": initiator, "transport": transport}


def _start(role: str, folder: Path, mode: str, test: str, variant: str) -> subprocess.Popen[bytes]:
    """A NIXL end in a process of its own, its UCX reporting the protocols it chose into the folder."""
    env = dict(os.environ)
    env["UCX_PROTO_INFO"], env["UCX_LOG_FILE"] = "y", str(folder / f"ucx-{role}.log")
    env.pop(_SGL_ENV, None)  # the variant decides, never the caller's environment (a row must say how NIXL posted)
    if variant == "sgl":
        env[_SGL_ENV] = "1"
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
    """Until both ends exit; LaunchError as soon as one fails: the signal that killed it (its last
    line is then not why it ended), else its exit code and its own last line."""
    deadline = time.monotonic() + timeout
    while True:
        codes = {role: process.poll() for role, process in processes.items()}
        for role, code in codes.items():
            if code is not None and code < 0:
                raise LaunchError(
                    f"NIXL's {role} was killed by signal {_signal_name(-code)} ({-code}); "
                    f"its last line: {_last_line(folder / f'{role}.out')}"
                )
            if code not in (None, 0):
                raise LaunchError(f"NIXL's {role} failed (exit {code}): {_last_line(folder / f'{role}.out')}")
        if all(code == 0 for code in codes.values()):
            return
        if time.monotonic() > deadline:
            lines = "; ".join(f"{role}: {_last_line(folder / f'{role}.out')}" for role in processes)
            raise LaunchError(
                f"NIXL's target and initiator did not finish in {timeout:g} s (--nixl-timeout sets this wait): {lines}"
            )
        time.sleep(0.02)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


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


def run_blocks(case: _Case, plan: NixlPlan, validate: bool) -> dict[int, dict[str, Mapping[str, object]]]:
    """rdmabench's block-list entries of one `rdmabench run` of the case's list: by size, then by who
    posted the list (measure/postings.py), in the run's order (entries read back: open JSON, narrowed)."""
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
    if plan.load is not None:
        options += ["--beside", plan.load.label]
    found: dict[int, dict[str, Mapping[str, object]]] = {}
    ran = run_document(options, samples=plan.samples, sample_time=plan.sample_time)
    metadata = ran.get("metadata")
    skipped = metadata.get("skipped_postings") if isinstance(metadata, Mapping) else None
    case.skipped = {str(path): str(why) for path, why in skipped.items()} if isinstance(skipped, Mapping) else {}
    results = ran.get("results")
    for entry in results if isinstance(results, list) else ():
        blocks = BlockList.from_json(entry.get(BLOCKS)) if isinstance(entry, Mapping) else None
        size = entry.get("size_bytes") if isinstance(entry, Mapping) else None
        if blocks is not None and blocks.count == case.shape.count and isinstance(size, int) and size in case.sizes:
            if plan.beside is None or entry.get("beside"):  # (a list of one contiguous block is its own reference)
                found.setdefault(size, {})[blocks.posted] = entry
    missing_sizes = [size for size in case.sizes if size not in found]
    if missing_sizes:
        raise LaunchError(f"rdmabench run measured no block list of {case.label} at {missing_sizes}")
    return found


# --- the rows -------------------------------------------------------------------------------------

# Per transfer, as both sides report them: the block record's fields the row has of each side.
_PerTransfer = Literal["transfer_gbps_p50", "post_share_p50", "descriptors_per_second_p50", "transfers"]


def _row(
    case: _Case,
    plan: NixlPlan,
    size: int,
    variant: str,
    before: PairRun,
    after: PairRun,
    unchecked: Mapping[str, object],
    checked: Mapping[str, object],
) -> NixlRow:
    """One list at one size, one rdmabench path beside one NIXL variant: NIXL's figures (the mean of its
    runs before and after rdmabench's), rdmabench's unchecked and checked, and the ratios taken in this
    round. Beside compute, the main figures are both sides' beside it; alone and slowdowns join them."""
    shape = case.shape
    row: NixlRow = {
        "test": case.test, "nixl_operation": OPERATIONS[case.test], "mode": plan.mode, "case": case.label,
        "size_bytes": size, "count": shape.count, "layout": shape.layout, "regions": shape.regions,
        "transfer_bytes": shape.count * size, "nixl_variant": variant,
    }  # fmt: skip
    if case.handoff is not None:
        row["handoff"] = case.handoff.record()
    if case.skipped:
        row["rdmabench_skipped"] = case.skipped
    row["nixl_threads"] = plan.threads
    part: Literal["blocks", "beside"] = "blocks" if plan.beside is None else "beside"
    row |= _nixl_figures(before, after, part) | _rdmabench_figures(unchecked, case.test)
    if plan.load is not None:
        row |= beside_figures(plan.load, before, after, unchecked)
    record = _record(checked)
    row["checked_gbps"], row["checked_p99_us"] = record.transfer_gbps_p50, record.transfer_us["p99"]
    row["ratio_gbps"] = row["rdmabench_gbps"] / row["nixl_gbps"]
    row["ratio_p99"] = row["rdmabench_p99_us"] / row["nixl_p99_us"]
    row["validation_share"] = row["checked_gbps"] / row["rdmabench_gbps"]  # of the unchecked GB/s, kept checked
    if row.get("ceiling_gbps"):
        row["nixl_of_ceiling"] = row["nixl_gbps"] / row["ceiling_gbps"]
        row["rdmabench_of_ceiling"] = row["rdmabench_gbps"] / row["ceiling_gbps"]
    row["transport"] = f"{unchecked.get('transport')} ({unchecked.get('protocol')})"
    row["nixl_transport"] = " | ".join(dict.fromkeys(str(run.get("transport")) for run in (before, after)))
    return row


def _nixl_figures(before: PairRun, after: PairRun, part: Literal["blocks", "beside"] = "blocks") -> NixlFigures:
    """NIXL's figures of `part` (its transfers alone, "blocks", or beside compute, "beside"), each the
    mean of its two runs; its GB/s of each run and their drift."""
    runs = (before, after)

    def each(name: _PerTransfer) -> float:
        return mean(run["initiator"][part][name] for run in runs)

    def tail(quantile: str) -> float:
        return mean(run["initiator"][part]["transfer_us"][quantile] for run in runs)

    out: NixlFigures = {
        "nixl_gbps": each("transfer_gbps_p50"), "nixl_post_share": each("post_share_p50"),
        "nixl_descriptors_per_s": each("descriptors_per_second_p50"), "nixl_transfers": each("transfers"),
        "nixl_p50_us": tail("p50"), "nixl_p99_us": tail("p99"), "nixl_p999_us": tail("p99.9"),
        "nixl_make_us": mean(run["initiator"][part]["make_us_p50"] for run in runs),
        "nixl_cpu_s_per_gb": mean(run["initiator"][part]["cpu_s_per_gb"] for run in runs),
    }  # fmt: skip
    if part == "blocks":  # the list's median transfer against one contiguous descriptor's
        out["nixl_vs_one"] = mean(
            run["initiator"]["blocks"]["transfer_gbps_p50"] / run["initiator"]["reference"]["transfer_gbps_p50"]
            for run in runs
        )
    else:  # beside compute, as rdmabench's: the list's throughput beside against the reference alone
        out["nixl_vs_one"] = mean(
            throughput(run["initiator"]["beside"]) / throughput(run["initiator"]["reference"]) for run in runs
        )
    out["nixl_before"], out["nixl_after"] = (run["initiator"][part]["transfer_gbps_p50"] for run in runs)
    out["nixl_drift"] = abs(out["nixl_after"] - out["nixl_before"]) / max(out["nixl_gbps"], 1e-12)
    cold = before["initiator"]["cold_s"]
    out = with_cold(out, "nixl", {name: mean(run["initiator"]["cold_s"][name] for run in runs) for name in cold})
    # the target's own: the memory the initiator moves into or out of
    out["nixl_cold_target_register_s"] = mean(run["target"]["register_s"] for run in runs)
    out["nixl_cold_target_metadata_s"] = mean(run["target"]["metadata_s"] for run in runs)
    told = [run["initiator"][part].get("nixl_telemetry") for run in runs]
    if all(told):  # NIXL's own clock of its C++ path, without Python's, and the descriptors it posted
        out["nixl_own_post_us"] = mean(t["post_us_p50"] for t in told)  # type: ignore[index]
        out["nixl_own_transfer_us"] = mean(t["transfer_us_p50"] for t in told)  # type: ignore[index]
        out["nixl_descriptors_posted"] = mean(t["descriptors_posted"] for t in told)  # type: ignore[index]
    return out


def _record(entry: Mapping[str, object]) -> BlockList:
    """An rdmabench entry's block-list record (run_blocks kept only entries that have one)."""
    record = BlockList.from_json(entry.get(BLOCKS))
    assert record is not None
    return record


def _rdmabench_figures(entry: Mapping[str, object], test: str) -> NixlFigures:
    """rdmabench's figures of one run (validation off): its block record's, and the initiator's CPU."""
    record = _record(entry)
    cpu = entry.get("cpu_s_per_gb")
    ours = cpu.get("src" if test == "put" else "dst") if isinstance(cpu, Mapping) else None
    out: NixlFigures = {
        "rdmabench_gbps": record.transfer_gbps_p50, "rdmabench_post_share": record.post_share_p50,
        "rdmabench_descriptors_per_s": record.descriptors_per_second_p50, "rdmabench_transfers": record.transfers,
        "rdmabench_p50_us": record.transfer_us["p50"], "rdmabench_p99_us": record.transfer_us["p99"],
        "rdmabench_p999_us": record.transfer_us["p99.9"],
        "rdmabench_step_gbps": figure(entry, "bandwidth_gbps"),  # all bytes over the step's time, samples' median
        "rdmabench_cpu_s_per_gb": ours if isinstance(ours, (int, float)) and not isinstance(ours, bool) else None,
        "rdmabench_vs_one": record.share_of_contiguous, "rdmabench_posted_by": record.posted,
    }  # fmt: skip
    if record.posted_descriptors is not None:  # a request per descriptor, adjacent blocks merged
        out["rdmabench_descriptors_posted"] = record.posted_descriptors
    if record.ceiling_gbps:  # the GPU's own copy of the list: each side's per-transfer GB/s against it
        out["ceiling_gbps"] = record.ceiling_gbps
    return with_cold(out, "rdmabench", record.cold_s or {})
