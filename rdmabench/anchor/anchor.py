"""Side-by-side comparison with the C anchor: ucx_perftest (from the libucx wheel) and rdmabench on
the same pair of local processes, memory type and sizes, in one go. A benchmark, not a test: it
prints ratios measured in the same run, because these machines are too noisy for absolute targets.
ucx_perftest runs just before and just after rdmabench (perftest.Bracket): a round in which the two
differ by more than DRIFT_LIMIT is marked unsteady, and --repeat gives the steady rounds' medians.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from ..errors import ConfigError, LaunchError
from ..hardware.gpu import visible_gpu_count
from ..measure import registry
from ..units import format_size
from . import ceilings
from .perftest import Bracket, perftests, same_ucx_settings
from .rounds import DRIFT_LIMIT, AnchorName, figure, repeated, round_lines, rounds_median, run_entries, spread, text


class _AnchorKey(TypedDict):
    test: str
    size_bytes: int
    mode: str  # host, host/ucx or device
    rdmabench_mode: str


class AnchorRow(_AnchorKey, total=False):
    """One row of the ucx_perftest anchor (its JSON: these keys, in the order each row is built):
    the anchor's figure (the mean of its runs around rdmabench's, and their drift) or a copy-engine
    ceiling's, rdmabench's checked, unchecked, Python-loop and one-buffer figures with their ratios,
    the message rates and the extra time a message; with --repeat, the merge's (rounds.rounds_median)."""

    anchor_test: str
    anchor: float
    anchor_before: float
    anchor_after: float
    anchor_drift: float
    ranks: int  # a ceiling's: the ranks rdmabench ran on
    validated: float
    ratio_validated: float
    unvalidated: float
    ratio_unvalidated: float
    python_loop: float | None
    ratio_python_loop: float | None
    one_buffer: float | None
    ratio_one_buffer: float | None
    anchor_msg_rate: float
    rdmabench_msg_rate: float
    overhead_us_per_msg: float | None
    peer_copy: float | None
    ratio_peer_copy: float | None
    engine: str | None
    ucx_settings_set_by_ucxx: dict[str, str]
    transport: str | None
    rounds: int
    runs: dict[str, list[float]]
    steady_rounds: int
    steady_ratio_validated: float
    steady_ratio_unvalidated: float
    steady_ratio_one_buffer: float
    incomplete: str


class AnchorDocument(TypedDict):
    """What `anchor -o` writes of the ucx_perftest anchor."""

    schema: AnchorName
    rows: list[AnchorRow]


def run_rdmabench(
    test: str,
    sizes: list[int],
    mode: str,
    validate: bool,
    engine: str = "auto",
    one_buffer: bool = False,
    ranks: int = 2,
    extra: tuple[str, ...] = (),
) -> dict[int, Mapping[str, object]]:
    """rdmabench's entry per size of a `run --np ranks` of `test`: the one sent from rank 0, or, where
    rank 0 only receives (an incast to it), one received by it."""
    command = ["--test", test, "--mode", mode, *extra, "--sizes", ",".join(str(s) for s in sizes), "--engine", engine]
    if not validate:
        command.append("--no-validate")
    if one_buffer:
        command.append("--one-buffer")
    entries = run_entries(command, ranks)
    received = {int(figure(e, "size_bytes")): e for e in entries if e.get("dst_rank") == 0}
    return received | {int(figure(e, "size_bytes")): e for e in entries if e.get("src_rank") == 0}


@dataclass(frozen=True)
class Ceiling:
    """An anchor that is a copy-engine ceiling (ceilings.py), not a ucx_perftest run: GPU memory only."""

    name: str  # the rows' anchor_test
    gbps: Callable[[int], float | None]
    test: str  # what rdmabench runs against it: this test, with these options, on this many ranks
    options: tuple[str, ...]
    ranks: Callable[[], int]


CEILINGS = {
    "bibw": Ceiling("bidirectional peer copy", ceilings.bidirectional_copy_gbps, "bibw", (), lambda: 2),
    # One rank a GPU, every other GPU sending to GPU 0's rank at once.
    "incast": Ceiling(
        "all-to-one copy",
        ceilings.all_to_one_copy_gbps,
        "bw",
        ("--pattern", "incast", "--root", "0"),
        visible_gpu_count,
    ),
}

# Tests that can run with --one-buffer (ucx_perftest's own buffer layout).
ONE_BUFFER_TESTS = ("bw",)

# rdmabench test -> (ucx_perftest test, whether its figure is a latency)
ANCHORS = {
    "bw": ("tag_bw", False),
    "lat": ("tag_lat", True),
    "put": ("ucp_put_bw", False),
    "get": ("ucp_get", False),
    "put-lat": ("ucp_put_lat", True),
}


def compare(
    mode: str, sizes: list[int], tests: list[str], repeat: int = 1, progress: Callable[[str], None] | None = None
) -> list[AnchorRow]:
    """Rows of (test, size, anchor figure, rdmabench figures with and without validation, ratios).
    With `repeat` > 1 the whole comparison runs that many times and each row holds the medians
    (median_rows)."""
    if repeat < 1:
        raise ConfigError(f"--repeat must be at least 1, not {repeat}")
    _check(mode, tests)
    return repeated(lambda: _compare_once(mode, sizes, tests), repeat, median_rows, progress, "anchor")


# The figures of a row that median_rows takes the median of; each ratio is taken per round (both
# programs side by side in that round), then its median: never a ratio of two medians.
FIGURES = (
    "anchor", "validated", "unvalidated", "python_loop", "one_buffer", "peer_copy", "ratio_validated",
    "ratio_unvalidated", "ratio_python_loop", "ratio_one_buffer", "ratio_peer_copy", "anchor_msg_rate",
    "rdmabench_msg_rate", "overhead_us_per_msg", "anchor_before", "anchor_after", "anchor_drift",
)  # fmt: skip
# The ratios also given as medians of the steady rounds alone (ucx_perftest held still around them),
# by the name the table gives them.
STEADY_RATIOS = (("checked", "ratio_validated"), ("unchecked", "ratio_unvalidated"), ("1 buffer", "ratio_one_buffer"))


def median_rows(rounds: list[list[AnchorRow]], incomplete: str | None = None) -> list[AnchorRow]:
    """The rounds' rows as one (rounds.rounds_median): each figure's median, the steady rounds' ratios beside them."""
    key, labels = ("test", "mode", "size_bytes"), ("engine", "transport")
    return rounds_median(rounds, key, FIGURES, labels, "anchor_drift", STEADY_RATIOS, incomplete)


def _check(mode: str, tests: list[str]) -> None:
    """Refuse a bad mode or test before anything runs (not after the tests before it have run)."""
    if mode not in ("host", "device"):
        raise ConfigError(f"unknown anchor mode {mode!r}: choose host or device")
    for test in tests:
        if test not in ANCHORS and not (test in CEILINGS and mode == "device"):
            raise ConfigError(
                f"unknown anchor test {test!r}: choose {', '.join(ANCHORS)} (and, with --mode device, "
                f"{', '.join(CEILINGS)})"
            )


def _compare_once(mode: str, sizes: list[int], tests: list[str]) -> list[AnchorRow]:
    device = mode == "device"
    rd_mode = "device" if device else "pageable"
    shared = same_ucx_settings()
    rows: list[AnchorRow] = []
    for test in tests:
        if test in CEILINGS and device:
            rows.extend(_compare_ceiling(test, sizes))
            continue
        rows.extend(_compare_test(test, sizes, device, rd_mode, shared))
        if not device and registry.get(test).one_sided:
            # ucx_perftest's host buffers are allocated by UCX (shared segments a peer attaches): the
            # like-for-like figure is rdmabench's `ucx` memory; `pageable` is the program's own memory.
            rows.extend(_compare_test(test, sizes, device, "ucx", shared))
    return rows


def _compare_test(test: str, sizes: list[int], device: bool, rd_mode: str, shared: dict[str, str]) -> list[AnchorRow]:
    perf_test, latency = ANCHORS[test]
    before = perftests(perf_test, sizes, device)
    checked = run_rdmabench(test, sizes, rd_mode, validate=True)
    unchecked = run_rdmabench(test, sizes, rd_mode, validate=False)
    # The same run with the Python loop timing each step: what the native loop buys (one-sided
    # tests have no Python loop).
    python = None if registry.get(test).one_sided else run_rdmabench(test, sizes, rd_mode, False, engine="python")
    # ucx_perftest sends every message of its window from one buffer into one: the like-for-like
    # figure (cache-resident, unchecked) beside rdmabench's buffer per message.
    one = run_rdmabench(test, sizes, rd_mode, False, one_buffer=True) if test in ONE_BUFFER_TESTS else None
    after = perftests(perf_test, sizes, device)
    rows = []
    field = "latency_us" if latency else "bandwidth_gbps"
    for size in sizes:
        bracket = Bracket(before[size], after[size])
        mode = "device" if device else ("host" if rd_mode == "pageable" else f"host/{rd_mode}")
        anchor = bracket.mean(latency)
        validated, unvalidated = figure(checked[size], field), figure(unchecked[size], field)
        python_loop = figure(python[size], field) if python is not None else None
        one_buffer = figure(one[size], field) if one is not None else None
        row: AnchorRow = {"test": test, "size_bytes": size, "mode": mode, "rdmabench_mode": rd_mode}
        row["anchor_test"] = perf_test
        row["anchor"] = anchor
        row["anchor_before"], row["anchor_after"] = bracket.pair(latency)
        row["anchor_drift"] = bracket.drift(latency)
        row["validated"], row["ratio_validated"] = validated, validated / anchor
        row["unvalidated"], row["ratio_unvalidated"] = unvalidated, unvalidated / anchor
        row["python_loop"] = python_loop
        row["ratio_python_loop"] = python_loop / anchor if python_loop is not None else None
        row["one_buffer"] = one_buffer
        row["ratio_one_buffer"] = one_buffer / anchor if one_buffer is not None else None
        if not latency:
            row["anchor_msg_rate"] = bracket.message_rate
            row["rdmabench_msg_rate"] = unvalidated * 1e9 / size
            # Extra time rdmabench spends per message, beyond what UCX itself needs.
            row["overhead_us_per_msg"] = (1 / row["rdmabench_msg_rate"] - 1 / bracket.message_rate) * 1e6
            peer = ceilings.peer_copy_gbps(size) if device else None
            row["peer_copy"] = peer
            row["ratio_peer_copy"] = validated / peer if peer else None
        else:
            row["overhead_us_per_msg"] = unvalidated - anchor
        row["engine"] = text(checked[size], "engine")
        row["ucx_settings_set_by_ucxx"] = shared
        row["transport"] = text(checked[size], "transport")
        rows.append(row)
    return rows


def _compare_ceiling(test: str, sizes: list[int]) -> list[AnchorRow]:
    """A device pattern against its copy-engine ceiling: rdmabench's aggregate (bibw: each
    direction's bytes once over the slower direction's time; an incast: the pattern's) over the
    copies' aggregate."""
    ceiling = CEILINGS[test]
    if visible_gpu_count() < 2:
        raise LaunchError(f"the {ceiling.name} (the anchor of {test}) needs two GPUs")
    ranks = ceiling.ranks()
    checked = run_rdmabench(ceiling.test, sizes, "device", True, ranks=ranks, extra=ceiling.options)
    unchecked = run_rdmabench(ceiling.test, sizes, "device", False, ranks=ranks, extra=ceiling.options)
    rows = []
    for size in sizes:
        gbps = ceiling.gbps(size)
        if gbps is None:
            raise LaunchError(f"the {ceiling.name} (the anchor of {test}) needs two GPUs")
        validated, unvalidated = _aggregate(checked[size]), _aggregate(unchecked[size])
        row: AnchorRow = {"test": test, "size_bytes": size, "mode": "device", "rdmabench_mode": "device"}
        row["anchor_test"], row["anchor"], row["ranks"] = ceiling.name, gbps, ranks
        row["validated"], row["ratio_validated"] = validated, validated / gbps
        row["unvalidated"], row["ratio_unvalidated"] = unvalidated, unvalidated / gbps
        row["python_loop"] = row["ratio_python_loop"] = row["overhead_us_per_msg"] = None
        row["one_buffer"] = row["ratio_one_buffer"] = None
        row["engine"], row["transport"] = text(checked[size], "engine"), text(checked[size], "transport")
        rows.append(row)
    return rows


def _aggregate(entry: Mapping[str, object]) -> float:
    """An entry's aggregate GB/s: its pattern's, else its link's aggregate, else its bandwidth."""
    for name in ("pattern_aggregate_gbps", "aggregate_gbps"):
        if entry.get(name):
            return figure(entry, name)
    return figure(entry, "bandwidth_gbps")


def _one_round(row: AnchorRow) -> bool:
    """The row is one round's figures: no --repeat, or an incomplete one that finished one round."""
    return (row.get("rounds") or 1) == 1


def _drift(row: AnchorRow) -> str:
    drift = row.get("anchor_drift")
    if drift is None:  # a copy-engine ceiling: measured once, no bracket
        return "-"
    if not _one_round(row):  # the rounds' median: which rounds were steady is said under the table
        return f"{drift:.1%}"
    return f"{drift:.1%}" + ("!" if drift > DRIFT_LIMIT else "")


def _unsteady_lines(rows: list[AnchorRow]) -> list[str]:
    """Under a one-round table: a warning for each row whose anchor moved too much to trust its ratios."""
    unsteady = [r for r in rows if _one_round(r) and (r.get("anchor_drift") or 0) > DRIFT_LIMIT]
    lines = [
        f"# UNSTEADY: {r['test']} {format_size(r['size_bytes'])}: ucx_perftest read {r['anchor_before']:.3f} before "
        f"rdmabench ran and {r['anchor_after']:.3f} after; its ratios are unreliable"
        for r in unsteady
    ]
    if lines:
        lines.append("# the machine's speed changed while the programs ran: rerun with --repeat 5 or more")
    return lines


def _steady_text(row: AnchorRow) -> str:
    if "steady_rounds" not in row:
        return ""
    text = f"  steady rounds {row['steady_rounds']} of {row['rounds']}"
    if row["steady_rounds"]:
        ratios = [(name, row.get(f"steady_{ratio}")) for name, ratio in STEADY_RATIOS]
        text += ": " + ", ".join(f"{name} {value:.2f}" for name, value in ratios if value is not None)
    return text


def _round_heading(repeated: list[AnchorRow]) -> str:
    steady = (
        f"; drift is the rounds' median; steady rounds: those whose anchor drifted {DRIFT_LIMIT:.0%} or less, and "
        "each ratio's median over them alone"
        if any("steady_rounds" in r for r in repeated)
        else ""
    )
    return (
        f"# every figure above is the median of {repeated[0]['rounds']} rounds, and each ratio the median of the "
        "rounds' ratios (each taken within its round), so a ratio need not equal its figures' quotient; "
        f"the spread over the rounds, min-max (every round's figures are in the JSON, `runs`){steady}:"
    )


def _round_line(r: AnchorRow) -> str:
    return (
        f"{r['test']:<7} {r['mode']:<8} {format_size(r['size_bytes']):>7} checked {spread(r, 'ratio_validated')}"
        f"  unchecked {spread(r, 'ratio_unvalidated')}  1 buffer {spread(r, 'ratio_one_buffer')}"
        f"  anchor {spread(r, 'anchor', 3)}{_steady_text(r)}"
    )


def format_rows(rows: list[AnchorRow]) -> str:
    lines = [
        "# ratios measured side by side in this run; bw, put, get in GB/s (1e9 B/s), lat, put-lat in us (half round trip)",
        "# anchor: ucx_perftest tag_bw, tag_lat, ucp_put_bw, ucp_get, ucp_put_lat; bibw (device): both copy engines "
        "copying GPU0 <-> GPU1 at once; incast (device, a rank a GPU): every GPU copying into GPU 0 at once; "
        "aggregates; rdmabench checked = default (every byte validated), unchecked = --no-validate,",
        "# python = --no-validate --engine python (the step timed by the Python loop instead of the native one);",
        "# 1 buffer = --no-validate --one-buffer (bw): every message of the window in one buffer, as ucx_perftest's are;",
        "# mode host = rdmabench's pageable memory, host/ucx = host memory allocated by UCX as ucx_perftest's is;",
        "# +us/msg = rdmabench's extra time per message over the anchor's (unchecked)",
        f"# drift = how far ucx_perftest moved between its run just before rdmabench's and its run just after (the "
        f"anchor is their mean); over {DRIFT_LIMIT:.0%} (!) the machine did not hold still and the row's ratios are "
        "unreliable",
        "# both ran with the UCX settings UCXX sets: "
        + (
            ", ".join(f"{k}={v}" for k, v in sorted((rows[0].get("ucx_settings_set_by_ucxx") or {}).items()))
            if rows
            else ""
        )
        + " (and every UCX_* of this environment)",
        f"{'test':<7} {'mode':<8} {'size':>7} {'anchor':>10} {'checked':>10} {'ratio':>6} {'unchecked':>10} {'ratio':>6} "
        f"{'python':>10} {'ratio':>6} {'1 buffer':>10} {'ratio':>6} {'+us/msg':>8} {'drift':>7}  engine transport",
    ]
    for r in rows:
        python = "-" if r["python_loop"] is None else f"{r['python_loop']:.3f}"
        python_ratio = "-" if r["ratio_python_loop"] is None else f"{r['ratio_python_loop']:.2f}"
        one = "-" if r.get("one_buffer") is None else f"{r['one_buffer']:.3f}"
        one_ratio = "-" if r.get("ratio_one_buffer") is None else f"{r['ratio_one_buffer']:.2f}"
        extra = "-" if r["overhead_us_per_msg"] is None else f"{r['overhead_us_per_msg']:.2f}"
        lines.append(
            f"{r['test']:<7} {r['mode']:<8} {format_size(r['size_bytes']):>7} {r['anchor']:>10.3f} {r['validated']:>10.3f} "
            f"{r['ratio_validated']:>6.2f} {r['unvalidated']:>10.3f} {r['ratio_unvalidated']:>6.2f} "
            f"{python:>10} {python_ratio:>6} {one:>10} {one_ratio:>6} {extra:>8} {_drift(r):>7}  {r['engine']} "
            f"{r['transport']}"
        )
    for r in rows:
        if r.get("anchor_msg_rate") is not None and r["size_bytes"] <= 64:
            lines.append(
                f"# {r['test']} message rate at {r['size_bytes']} B: rdmabench {r['rdmabench_msg_rate'] / 1e6:.2f} M/s "
                f"(unchecked), ucx_perftest {r['anchor_msg_rate'] / 1e6:.2f} M/s: ratio "
                f"{r['ratio_unvalidated']:.2f}"  # the same ratio; with --repeat, the median of the rounds' ones
            )
    lines.extend(_unsteady_lines(rows))
    lines.extend(round_lines(rows, _round_heading, _round_line))
    peers = [r for r in rows if r.get("peer_copy")]
    if peers:
        lines.append("# device bw against the copy engine's GPU0 -> GPU1 peer copy (cudaMemcpyPeerAsync), same run:")
        for r in peers:
            lines.append(
                f"{r['test']:<7} {'device':<6} {format_size(r['size_bytes']):>7} peer copy {r['peer_copy']:>9.3f}  "
                f"rdmabench checked {r['validated']:>9.3f}  ratio {r['ratio_peer_copy']:.2f}"
            )
    return "\n".join(lines)
