"""The table rank 0 prints as each size (or round) completes. Its columns follow the test's record:
a time figure (latency) gets latency columns, a pair round that goes both ways gets one column per
direction and the aggregate, any other bandwidth the median, min and max."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from ...escape import visible, visible_lines
from ...hardware.limits import CACHE_REGIME
from ...measure.blockrecord import BlockList
from ...measure.postings import by_words
from ...stats import median
from ...units import DISPLAY_UNITS, format_size

if TYPE_CHECKING:
    from ...measure.entry import Entry
    from ...measure.registry import TestKind
    from ..files.contents import MatrixRecord


def _transport(entry: Entry) -> str:
    transport = visible(entry.path.transport or "unreported")
    return f"{transport} ({visible(entry.path.protocol)})" if entry.path.protocol else transport


_SHORT_KIND = {"host memory copy": "host copy"}


def _progress(done: int, total: int, eta: float) -> str:
    left = "" if eta != eta else f", about {eta:.0f} s left"  # eta is NaN before the first round ends
    return f"{done}/{total} rounds done{left}"


def _cost(entry: Entry) -> str:
    """CPU seconds per GB at each end ('src/dst') and the wire check's ratio, or '-' for each."""
    cpu = entry.cpu_s_per_gb or {}
    spent = f"{cpu['src']:.2g}/{cpu['dst']:.2g}" if cpu.get("src") is not None and cpu.get("dst") is not None else "-"
    ratio = entry.wire["ratio"] if entry.wire is not None else None
    return f"{spent:>13} {'-' if ratio is None else f'{ratio:.2f}':>5}"


_COST_HEADER = f"{'CPU s/GB':>13} {'wire':>5}"


def _share(entry: Entry) -> str:
    share, limit = entry.limit.share_of_limit, entry.limit.link_limit
    if (entry.limit.link_limit_unknown or "").startswith(CACHE_REGIME):  # a copy that may run from a cache: no bound
        return "in cache"
    if share is None or limit is None:
        return "-"
    return f"{share:.0%} {visible(_SHORT_KIND.get(limit['kind'], str(limit['kind'])))}"


class ProgressTable:
    def __init__(self, kind: TestKind, out: TextIO, units: str = "GB/s", beside: str | None = None):
        self.kind = kind
        self.beside = beside  # the compute load beside the links (--beside): the rows gain alone and model
        self.out = out
        self.units = units
        self.factor, self.unit_text = DISPLAY_UNITS[units]
        self.bandwidth = kind.is_bandwidth
        self.two_way = kind.both_ways
        # One line per link, or (many links: a cluster's sweep) one line per round; the results file
        # holds every link either way.
        self.per_link = True
        self._warned: set[str] = set()
        self._block_header = False
        self._path_note: str | None = None

    def _figure(self, value: float) -> float:
        """A figure in the table's unit: bandwidths are converted, other units shown as they are."""
        return value * self.factor if self.bandwidth else value

    def header(
        self, src: int, dst: int, src_mode: str, dst_mode: str, validate: bool, blocks: str | None = None
    ) -> None:
        check = "every byte of every message checked" if validate else "payload NOT validated (--no-validate)"
        ends = f"rank {src} ({src_mode}) -> rank {dst} ({dst_mode})"
        if self.kind.offload is not None:  # the rank with itself: its two pools
            ends = f"rank {src}'s {src_mode} pool -> its own {dst_mode} pool"
        lines = [f"# rdmabench {self.kind.name}: {ends}; {check}"]
        u = self.units if self.bandwidth else self.kind.unit
        if blocks is not None:  # the block rows bring their own columns
            lines.append(f"# per transfer: {blocks}")
        elif self.kind.unit == "us":
            lines.append(f"# latency in microseconds: {self.kind.scope}, median of samples")
            lines.append(
                f"{'size':>8} {'iters':>8} {'median us':>10} {'min us':>9} {'p95 us':>9}  transport (UCX protocol)"
            )
        elif self.two_way:
            lines.append(
                f"# {self.unit_text}; each direction timed to its receiver's acknowledgement; "
                "aggregate = both directions' bytes / slower time; share = per direction, of the link's limit; "
                "CPU s/GB = each end's CPU seconds per GB moved (src/dst); wire = bytes counted on the link / bytes moved"
            )
            lines.append(
                f"{'size':>8} {'window':>6} {'iters':>7} {f'{src}->{dst} {u}':>13} {f'{dst}->{src} {u}':>13} "
                f"{'aggregate':>10} {'share':>14} {_COST_HEADER}  transport (UCX protocol)"
            )
        else:
            unit = self.unit_text if self.bandwidth else self.kind.unit
            lines.append(
                f"# {unit}, {self.kind.summary}, {self.kind.timing}; "
                "median of samples; share = of the link's physical limit"
                + (
                    "; CPU s/GB = each end's CPU seconds per GB moved (src/dst); wire = bytes counted on the link / "
                    "bytes moved"
                    if self.bandwidth
                    else ""
                )
            )
            cost = f" {_COST_HEADER}" if self.bandwidth else ""
            beside = f" {'alone':>9} {'model [range]':<20}" if self.beside else ""
            if self.beside:
                lines.append(
                    f"# beside {self.beside} on each rank's GPU: alone = the link with no compute beside it (each "
                    "pair's alone half, taken before the load starts); model = the load's slowdown beside it: its work lost over the shared window "
                    "(median [range] of the pairs judged, the worse GPU)"
                )
            lines.append(
                f"{'size':>8} {'window':>6} {'iters':>7} {f'median {u}':>12} {'min':>8} {'max':>8} {'share':>14}{cost}"
                f"{beside}  transport (UCX protocol)"
            )
        self._emit("\n".join(lines))

    def row(self, entries: list[Entry]) -> None:
        first = entries[0]
        size = format_size(first.size_bytes)
        s = first.stats
        blocks = first.step if isinstance(first.step, BlockList) else None
        if blocks is not None:
            line = self._block_row(first, blocks)
        elif self.kind.unit == "us":
            line = f"{size:>8} {first.steps.iterations:>8} {s['median']:>10.2f} {s['min']:>9.2f} {s['p95']:>9.2f}  {_transport(first)}"
        elif self.two_way and len(entries) > 1:
            forward, backward = entries[0], entries[1]
            aggregate = self._figure(forward.together.aggregate_gbps or 0.0)
            line = (
                f"{size:>8} {forward.steps.window:>6} {forward.steps.iterations:>7} {self._figure(forward.value):>13.3f} "
                f"{self._figure(backward.value):>13.3f} {aggregate:>10.3f} {_share(forward):>14} {_cost(forward)}  "
                f"{_transport(forward)}"
            )
        else:
            cost = f" {_cost(first)}" if self.bandwidth else ""
            line = (
                f"{size:>8} {first.steps.window or 1:>6} {first.steps.iterations:>7} {self._figure(s['median']):>12.3f} "
                f"{self._figure(s['min']):>8.3f} {self._figure(s['max']):>8.3f} {_share(first):>14}{cost}"
                f"{self._beside_cells(first)}  {_transport(first)}"
            )
        self._emit(line)
        for warning in sorted({w for e in entries for w in e.warnings}):
            self._emit(f"#   warning: {visible(warning)}")
        note = blocks.path_note if blocks is not None else None
        if note and note != self._path_note:  # auto posted from the CPU: why, once while it holds
            self._path_note = note
            self._emit(f"#   posted by the CPU: {visible(note)}")

    def _block_row(self, entry: Entry, blocks: BlockList) -> str:
        """A block-list row: the figure, every transfer's percentiles, and the contiguous reference."""
        if not self._block_header:
            self._block_header = True
            self._emit(
                f"# block lists: each transfer moves its blocks between pool slots; {self.unit_text} = all bytes / "
                "step time (median of samples); transfer us = each transfer's time, posting its blocks included "
                "(p50, p99, p99.9 of every transfer); post = posting alone (p50); vs one = against the same bytes "
                "as one contiguous message, measured just before; vs ceil = against the GPU's own copy of the same "
                "list (device memory); by = who posted the list ("
                + by_words()
                + ")"
                + (
                    f"; alone = the same list with no compute beside it (each pair's alone half, taken before the load starts); model = "
                    f"the slowdown of {self.beside} beside it (its work lost over the shared window, the worse GPU: "
                    "its 95% interval, or where the record has none the median [range] of the pairs judged; carve N: its GEMM planned for N SMs fewer); one msg rows "
                    "are measured alone"
                    if self.beside
                    else ""
                )
                + f"\n{'block':>8} {'blocks':>7} {'layout':<10} {self.units:>9} {'p50 us':>9} {'p99 us':>9} "
                f"{'p99.9 us':>9} {'post us':>8} {'vs one':>7} {'vs ceil':>7} {'by':>8}"
                + (f" {'alone':>9} {'model [range]':<20}" if self.beside else "")
                + "  transport (UCX protocol)"
            )
        us = blocks.transfer_us
        layout = "one msg" if blocks.one_message else blocks.layout
        share, ceiling = blocks.share_of_contiguous, blocks.share_of_ceiling
        return (
            f"{format_size(entry.size_bytes):>8} {blocks.count:>7} {layout:<10} {self._figure(entry.value):>9.3f} "
            f"{us['p50']:>9.1f} {us['p99']:>9.1f} {us['p99.9']:>9.1f} {blocks.post_us_p50:>8.1f} "
            f"{'-' if share is None else f'{share:.2f}':>7} {'-' if ceiling is None else f'{ceiling:.2f}':>7} "
            f"{blocks.posted_by or '-':>8}{self._beside_cells(entry)}  {_transport(entry)}"
        )

    def _beside_cells(self, entry: Entry) -> str:
        """' alone  x1.05': the transfer with no compute beside it and the model's slowdown (--beside)."""
        if not self.beside:
            return ""
        found = entry.beside
        if found is None:
            return f" {'-':>9} {'-':<20}"
        alone, slowdown = found.transfer_alone, found.slowdown
        # issue 54's 95% interval where the record has it, else the range over the pairs
        bounds = found.slowdown_interval or found.slowdown_range
        model = "-" if slowdown is None else f"x{slowdown:.3f}"
        if slowdown is not None and bounds:  # every beside figure with its interval (or its range)
            model += f" [{bounds[0]:.2f}-{bounds[1]:.2f}]"
        if found.load.carveout:
            model += f" carve {found.load.carveout}"
        return f" {'-' if alone is None else f'{self._figure(alone):.3f}':>9} {model:<20}"

    def pattern_header(
        self, pattern: str, links: int, rounds: int, src_mode: str, dst_mode: str, validate: bool
    ) -> None:
        check = "every byte of every message checked" if validate else "payload NOT validated (--no-validate)"
        at_once = "one link at a time" if links == rounds else f"{links} links in {rounds} concurrent round(s)"
        unit = self.unit_text if self.bandwidth else self.kind.unit
        self._emit(
            f"# rdmabench {self.kind.name} {pattern}: {links} links ({at_once}), senders {src_mode}, receivers {dst_mode}; {check}\n"
            f"# {unit}; each link timed to its own receiver's acknowledgement; share = of the link's physical limit"
            + ("; CPU s/GB (src/dst) and wire (counted / moved) as in a pair's table" if self.bandwidth else "")
        )

    def link_rows(self, entries: list[Entry], done: int, total: int, eta: float) -> None:
        if not self.per_link:
            self._round_line(entries, done, total, eta)
            return
        unit = self.units if self.bandwidth else self.kind.unit
        for entry in sorted(entries, key=lambda e: (e.src_rank, e.dst_rank)):
            figure = f"{self._figure(entry.value):>10.3f} {unit}"
            cost = f" {_cost(entry)}" if self.bandwidth else ""
            self._emit(
                f"{format_size(entry.size_bytes):>8}  {entry.src_rank:>4} -> {entry.dst_rank:<4} {figure} "
                f"{_share(entry):>14}{cost}  {entry.ends.link:<10} {_transport(entry)}"
            )
            for warning in entry.warnings:
                self._emit(f"#   warning: {visible(warning)}")
        aggregate = entries[0].together.pattern_aggregate_gbps
        if aggregate is not None:
            self._emit(
                f"#   all {len(entries)} links together: {aggregate * self.factor:.3f} {self.units} aggregate"
                + _pattern_share(entries[0])
            )
        self._emit(f"#   [{_progress(done, total, eta)}]")

    def _round_line(self, entries: list[Entry], done: int, total: int, eta: float) -> None:
        """A round in one line: its links' median and its worst link; each distinct warning once."""
        unit = self.units if self.bandwidth else self.kind.unit
        ordered = sorted(entries, key=lambda e: e.value, reverse=not self.kind.higher_is_better)
        worst, middle = ordered[0], median([e.value for e in entries])
        aggregate = entries[0].together.pattern_aggregate_gbps
        together = (
            f", {aggregate * self.factor:.3f} {self.units} together{_pattern_share(entries[0])}"
            if aggregate is not None
            else ""
        )
        self._emit(
            f"{format_size(worst.size_bytes):>8}  {len(entries)} links: median {self._figure(middle):.3f} {unit}, "
            f"worst {self._figure(worst.value):.3f} ({worst.src_rank} -> {worst.dst_rank}){together}  "
            f"[{_progress(done, total, eta)}]"
        )
        for warning in sorted({w for e in entries for w in e.warnings} - self._warned):
            self._warned.add(warning)
            self._emit(f"#   warning (first seen): {visible(warning)}")

    def matrices(self, matrices: list[MatrixRecord]) -> None:
        if not self.per_link:
            self._emit("# the N x N matrices are in the results file (`matrices`); `rdmabench report` draws them")
            return
        for matrix in matrices:
            values = matrix["values"]
            bandwidth = matrix["unit"] == "GB/s"
            unit = self.units if bandwidth else matrix["unit"]
            factor = self.factor if bandwidth else 1.0
            self._emit(
                f"# {matrix['test']} matrix, {format_size(matrix['size_bytes'])}, {unit} (row: sender, column: receiver; N/A: not measured)"
            )
            self._emit("        " + "".join(f"{j:>10}" for j in range(len(values))))
            for i, row in enumerate(values):
                cells = "".join(f"{v * factor:>10.3f}" if v is not None else f"{'N/A':>10}" for v in row)
                self._emit(f"{i:>8}{cells}")

    def note(self, text: str) -> None:
        self._emit(f"# {visible(text)}")

    def _emit(self, text: str) -> None:
        # Names are shown by the lines that hold them; this keeps any other from reaching the terminal raw.
        print(visible_lines(text), file=self.out, flush=True)


def _pattern_share(entry: Entry) -> str:
    """' (41% of NVLink egress of GPU 0 ..., shared by 3 of the 3 links)', or '' without a limit."""
    limit, share = entry.together.pattern_limit, entry.together.pattern_share_of_limit
    if not limit or share is None:
        return ""
    return f" ({share:.0%} of {limit['gbps']:.1f} GB/s: {visible(str(limit['detail']))})"
