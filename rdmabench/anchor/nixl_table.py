"""The NIXL anchor's table (`rdmabench anchor --against nixl`): its rows side by side, the cold costs,
NIXL's own telemetry, the figures beside compute, the rounds' spread, and the JSON document."""

from __future__ import annotations

from ..measure.postings import by_words
from ..units import format_size
from .nixl_row import NixlDocument, NixlRow
from .rounds import DRIFT_LIMIT, round_lines, spread

STEADY = (("GB/s", "ratio_gbps"), ("p99", "ratio_p99"))


# --- the table ------------------------------------------------------------------------------------


def format_rows(rows: list[NixlRow]) -> str:
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
        f"list ({by_words()}); NIXL = how NIXL posted (default: every descriptor on its own; sgl: "
        "NIXL_UCX_SGL_ENABLE=1, one scatter-gather list a transfer)",
        *_beside_heading(rows),
        f"{'test':<4} {'mode':<6} {'list':<26} {'block':>7} {'NIXL':>7} {'NIXL GB/s':>9} {'GB/s':>8} {'ratio':>6} "
        f"{'NIXL p99':>9} {'p99 us':>9} {'ratio':>6} {'checked':>7} {'post N/R':>11} {'desc/s N/R':>15} "
        f"{'CPU N/R':>11} {'vs one N/R':>11} {'of ceil N/R':>11} {'by':>8} {'drift':>6}  transport: rdmabench | NIXL",
    ]
    for r in rows:
        lines.append(
            f"{r['test']:<4} {r['mode']:<6} {r['case'][:26]:<26} {format_size(r['size_bytes']):>7} "
            f"{r.get('nixl_variant', 'default'):>7} {r['nixl_gbps']:>9.3f} {r['rdmabench_gbps']:>8.3f} {r['ratio_gbps']:>6.2f} {r['nixl_p99_us']:>9.1f} "
            f"{r['rdmabench_p99_us']:>9.1f} {r['ratio_p99']:>6.2f} {r['validation_share']:>7.2f} "
            f"{_pair(r.get('nixl_post_share'), r.get('rdmabench_post_share'), '.2f'):>11} "
            f"{_pair(r.get('nixl_descriptors_per_s'), r.get('rdmabench_descriptors_per_s'), '.3g'):>15} "
            f"{_pair(r.get('nixl_cpu_s_per_gb'), r.get('rdmabench_cpu_s_per_gb'), '.2g'):>11} "
            f"{_pair(r.get('nixl_vs_one'), r.get('rdmabench_vs_one'), '.2f'):>11} "
            f"{_pair(r.get('nixl_of_ceiling'), r.get('rdmabench_of_ceiling'), '.3f'):>11} "
            f"{r.get('rdmabench_posted_by', '-'):>8} {_drift(r):>6}  "
            f"{r['transport']} | {r['nixl_transport']}"
        )
    lines += _skipped_lines(rows)
    lines += _beside_lines(rows)
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
            f"#   {r['test']} {r['case']} {format_size(r['size_bytes'])} NIXL {r.get('nixl_variant', 'default')}: "
            f"posting {r['nixl_own_post_us']:.1f} us, "
            f"transfer {r['nixl_own_transfer_us']:.1f} us, {r['nixl_descriptors_posted']:.0f} of {int(r['count'])} "
            "descriptors posted" + _ours_posted(r)
            for r in told
        ]
    lines += round_lines(rows, _round_heading, _round_line)
    return "\n".join(lines)


def _skipped_lines(rows: list[NixlRow]) -> list[str]:
    """Each posting path asked of rdmabench that its run left out, once, with why."""
    said: dict[str, str] = {}
    for row in rows:
        said |= {path: str(why) for path, why in (row.get("rdmabench_skipped") or {}).items() if path not in said}
    return [f"# rdmabench --posting {path}: left out, {why}" for path, why in said.items()]


def _beside_heading(rows: list[NixlRow]) -> list[str]:
    beside = next((r["beside_load"] for r in rows if r.get("beside_load")), None)
    if beside is None:
        return []
    return [
        f"# BESIDE {beside} on both GPUs: every GB/s, p99, post share and desc/s above is taken while both GPUs "
        "compute (each side's own interleaved pairs: the load alone, then both at once); the lines below the "
        "table give each side's throughput alone and beside, and the model's slowdown"
    ]


def _beside_lines(rows: list[NixlRow]) -> list[str]:
    """Each row's list alone and beside compute, and the model's slowdown (the worse GPU's, pair by pair:
    median [min-max])."""
    found = [r for r in rows if r.get("beside_load")]
    if not found:
        return []
    unit = found[0].get("beside_unit", "")
    lines = [
        f"# beside {found[0]['beside_load']}: GB/s alone -> beside (all bytes over all transfers' time: beside a load "
        "the table's median transfer hides the transfers that waited for SMs the load held), and the model's "
        f"slowdown (its {unit} alone over beside, the worse GPU pair by pair: median [min-max]; 1.00 = untouched)"
    ]
    for r in found:
        where = f"#   {r['test']} {r['case'][:26]} {format_size(r['size_bytes'])}"
        lines.append(
            f"{where}: rdmabench {r.get('rdmabench_posted_by', '-')} "
            f"{_gbps(r.get('rdmabench_alone_gbps'), r.get('rdmabench_beside_gbps'))} slowdown "
            f"{_slowdown(r.get('rdmabench_slowdown'), r.get('rdmabench_slowdown_min'), r.get('rdmabench_slowdown_max'), r.get('rdmabench_unjudged'))}; "
            f"NIXL {r.get('nixl_variant', 'default')} {_gbps(r.get('nixl_alone_gbps'), r.get('nixl_beside_gbps'))} slowdown "
            f"{_slowdown(r.get('nixl_slowdown'), r.get('nixl_slowdown_min'), r.get('nixl_slowdown_max'), r.get('nixl_unjudged'))}; "
            f"ratio beside {_number(r.get('ratio_beside_gbps'))}"
        )
    return lines


def _gbps(alone: float | None, beside: float | None) -> str:
    return f"{_number(alone)} -> {_number(beside)} GB/s"


def _number(value: float | None) -> str:
    return "-" if value is None else format(value, ".3g")


def _slowdown(value: float | None, low: float | None, high: float | None, unjudged: str | None) -> str:
    if value is None:
        return f"- (not judged: {unjudged or 'no whole operation beside the transfers'})"
    return f"{value:.3f}" + (f" [{low:.2f}-{high:.2f}]" if low is not None and high is not None else "")


def _ours_posted(row: NixlRow) -> str:
    posted = row.get("rdmabench_descriptors_posted")
    return "" if posted is None else f" (rdmabench {row.get('rdmabench_posted_by', '-')}: {posted:.0f})"


def _pair(nixl: float | None, ours: float | None, spec: str) -> str:
    return "/".join("-" if value is None else format(value, spec) for value in (nixl, ours))


def _drift(row: NixlRow) -> str:
    text = f"{row['nixl_drift']:.0%}"
    return text + ("!" if (row.get("rounds") or 1) == 1 and row["nixl_drift"] > DRIFT_LIMIT else "")


def _cold_line(row: NixlRow) -> str:
    def part(side: str) -> str:
        prefix = f"{side}_cold_"
        found = [(name[len(prefix) : -2], value) for name, value in row.items() if name.startswith(prefix)]
        return " ".join(f"{name} {value:.3g}" for name, value in found if isinstance(value, (int, float)))

    where = f"{row['test']} {row['case']} {format_size(row['size_bytes'])}"
    nixl, ours = row.get("nixl_variant", "default"), row.get("rdmabench_posted_by", "-")
    return f"#   {where}: NIXL {nixl} {part('nixl')}; rdmabench {ours} {part('rdmabench')}"


def _round_heading(repeated: list[NixlRow]) -> str:
    return (
        f"# every figure above is the median of {repeated[0]['rounds']} rounds, each ratio the median of the rounds' "
        "ratios (each taken within its round); min-max over the rounds (every round's figures: the JSON's `runs`); "
        f"steady rounds: NIXL's two runs within {DRIFT_LIMIT:.0%} of each other, and the ratios' median over them:"
    )


def _round_line(r: NixlRow) -> str:
    found = (("GB/s", r.get("steady_ratio_gbps")), ("p99", r.get("steady_ratio_p99")))  # STEADY's, in its order
    steady = ", ".join(f"{name} {value:.2f}" for name, value in found if value is not None)
    return (
        f"{r['test']:<4} {r['case'][:26]:<26} {format_size(r['size_bytes']):>7} "
        f"{r.get('rdmabench_posted_by', '-')}/{r.get('nixl_variant', 'default')} GB/s ratio "
        f"{spread(r, 'ratio_gbps')}  p99 ratio {spread(r, 'ratio_p99')}  NIXL GB/s {spread(r, 'nixl_gbps')}"
        f"  rdmabench GB/s {spread(r, 'rdmabench_gbps')}  steady rounds {r.get('steady_rounds', 0)} of "
        f"{r['rounds']}" + (f": {steady}" if steady else "")
    )


def document(rows: list[NixlRow]) -> NixlDocument:
    """The rows as the JSON document `anchor --against nixl -o` writes."""
    return {"schema": {"name": "rdmabench-anchor", "version": 1}, "against": "nixl", "rows": rows}
