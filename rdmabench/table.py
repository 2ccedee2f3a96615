"""The table rank 0 prints as each size completes."""

from __future__ import annotations

from typing import Any, TextIO

from .units import DISPLAY_UNITS, format_size


def _transport(entry: dict[str, Any]) -> str:
    transport = entry.get("transport") or "unreported"
    protocol = entry.get("protocol")
    return f"{transport} ({protocol})" if protocol else transport


def _share(entry: dict[str, Any]) -> str:
    share = entry.get("share_of_limit")
    limit = entry.get("link_limit")
    if share is None or limit is None:
        return "-"
    return f"{share:.0%} {limit['kind']}"


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

    def note(self, text: str) -> None:
        self._emit(f"# {text}")

    def _emit(self, text: str) -> None:
        print(text, file=self.out, flush=True)
