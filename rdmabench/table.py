"""The table rank 0 prints as each size completes."""

from __future__ import annotations

from typing import Any, TextIO

from .units import DISPLAY_UNITS, format_size


def _transport(entry: dict[str, Any]) -> str:
    transport = entry.get("transport") or "unreported"
    protocol = entry.get("protocol")
    return f"{transport} ({protocol})" if protocol else transport


_SHORT_KIND = {"host memory copy": "host copy"}


def _share(entry: dict[str, Any]) -> str:
    share = entry.get("share_of_limit")
    limit = entry.get("link_limit")
    if share is None or limit is None:
        return "-"
    return f"{share:.0%} {_SHORT_KIND.get(limit['kind'], limit['kind'])}"


class ProgressTable:
    def __init__(self, test: str, out: TextIO, units: str = "GB/s"):
        self.test = test
        self.out = out
        self.units = units
        self.factor, self.unit_text = DISPLAY_UNITS[units]

    def header(self, src: int, dst: int, src_mode: str, dst_mode: str, validate: bool) -> None:
        check = "every byte of every message checked" if validate else "payload NOT validated (--no-validate)"
        lines = [f"# rdmabench {self.test}: rank {src} ({src_mode}) -> rank {dst} ({dst_mode}); {check}"]
        u = self.units
        if self.test == "lat":
            lines.append("# latency in microseconds: half a round trip, median of samples")
            lines.append(
                f"{'size':>8} {'iters':>8} {'median us':>10} {'min us':>9} {'p95 us':>9}  transport (UCX protocol)"
            )
        elif self.test == "bibw":
            lines.append(
                f"# {self.unit_text}; each direction timed to its receiver's acknowledgement; "
                "aggregate = both directions' bytes / slower time; share = per direction, of the link's limit"
            )
            lines.append(
                f"{'size':>8} {'window':>6} {'iters':>7} {f'{src}->{dst} {u}':>13} {f'{dst}->{src} {u}':>13} "
                f"{'aggregate':>10} {'share':>14}  transport (UCX protocol)"
            )
        else:
            lines.append(
                f"# {self.unit_text}, one direction, timed until the receiver acknowledged every message; "
                "median of samples; share = of the link's physical limit"
            )
            lines.append(
                f"{'size':>8} {'window':>6} {'iters':>7} {f'median {u}':>12} {'min':>8} {'max':>8} {'share':>14}  transport (UCX protocol)"
            )
        self._emit("\n".join(lines))

    def row(self, entries: list[dict[str, Any]]) -> None:
        first = entries[0]
        size = format_size(first["size_bytes"])
        f = self.factor
        if self.test == "lat":
            s = first["stats"]
            line = f"{size:>8} {first['iterations']:>8} {s['median']:>10.2f} {s['min']:>9.2f} {s['p95']:>9.2f}  {_transport(first)}"
        elif self.test == "bibw":
            forward = next(e for e in entries if e["src_rank"] == first["src_rank"])
            backward = next((e for e in entries if e is not forward), forward)
            line = (
                f"{size:>8} {forward['window']:>6} {forward['iterations']:>7} {forward['bandwidth_gbps'] * f:>13.3f} "
                f"{backward['bandwidth_gbps'] * f:>13.3f} {forward['aggregate_gbps'] * f:>10.3f} {_share(forward):>14}  {_transport(forward)}"
            )
        else:
            s = first["stats"]
            line = (
                f"{size:>8} {first['window']:>6} {first['iterations']:>7} {s['median'] * f:>12.3f} {s['min'] * f:>8.3f} "
                f"{s['max'] * f:>8.3f} {_share(first):>14}  {_transport(first)}"
            )
        self._emit(line)
        for warning in sorted({w for e in entries for w in e.get("warnings", [])}):
            self._emit(f"#   warning: {warning}")

    def pattern_header(
        self, pattern: str, links: int, rounds: int, src_mode: str, dst_mode: str, validate: bool
    ) -> None:
        check = "every byte of every message checked" if validate else "payload NOT validated (--no-validate)"
        at_once = "one link at a time" if links == rounds else f"{links} links in {rounds} concurrent round(s)"
        self._emit(
            f"# rdmabench {self.test} {pattern}: {links} links ({at_once}), senders {src_mode}, receivers {dst_mode}; {check}\n"
            f"# {self.unit_text}; each link timed to its own receiver's acknowledgement; share = of the link's physical limit"
        )

    def link_rows(self, entries: list[dict[str, Any]], done: int, total: int, eta: float) -> None:
        f = self.factor
        for entry in sorted(entries, key=lambda e: (e["src_rank"], e["dst_rank"])):
            if self.test == "lat":
                figure = f"{entry['latency_us']:>10.2f} us"
            else:
                figure = f"{entry['bandwidth_gbps'] * f:>10.3f} {self.units}"
            self._emit(
                f"{format_size(entry['size_bytes']):>8}  {entry['src_rank']:>4} -> {entry['dst_rank']:<4} {figure} "
                f"{_share(entry):>14}  {entry['link']:<10} {_transport(entry)}"
            )
            for warning in entry.get("warnings", []):
                self._emit(f"#   warning: {warning}")
        aggregate = entries[0].get("pattern_aggregate_gbps")
        if aggregate is not None:
            self._emit(f"#   all {len(entries)} links together: {aggregate * f:.3f} {self.units} aggregate")
        left = "" if eta != eta else f", about {eta:.0f} s left"  # eta is NaN before the first round ends
        self._emit(f"#   [{done}/{total} rounds done{left}]")

    def matrices(self, matrices: list[dict[str, Any]]) -> None:
        for matrix in matrices:
            values = matrix["values"]
            unit = matrix["unit"] if matrix["unit"] == "us" else self.units
            factor = 1.0 if matrix["unit"] == "us" else self.factor
            self._emit(
                f"# {matrix['test']} matrix, {format_size(matrix['size_bytes'])}, {unit} (row: sender, column: receiver; N/A: not measured)"
            )
            self._emit("        " + "".join(f"{j:>10}" for j in range(len(values))))
            for i, row in enumerate(values):
                cells = "".join(f"{v * factor:>10.3f}" if v is not None else f"{'N/A':>10}" for v in row)
                self._emit(f"{i:>8}{cells}")

    def note(self, text: str) -> None:
        self._emit(f"# {text}")

    def _emit(self, text: str) -> None:
        print(text, file=self.out, flush=True)
