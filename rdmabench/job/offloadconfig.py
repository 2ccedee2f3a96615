"""An offload's settings (--test swap-out, swap-in: measure/offloadsteps.py): its ends where no mode is
given, the checks of its ends against its direction, and its copy kernel's paces (--pace)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..measure import registry
from ..measure.postings import CPU, POOL, POSTINGS, Posting, parse_postings
from ..modes import MemoryMode

Paces = tuple[str | None, ...]  # an offload kernel's paces, as labels (None: its direction's default)


@dataclass
class Offload:
    """An offload's copy kernel (--test swap-out, swap-in with --posting kernel or all): its paces,
    SMSxCTASxTHREADS[,...], one list a pace (None: the direction's default, offloadsteps.DEFAULT_PACES)."""

    pace: str | None = None

    def check(self, postings: tuple[Posting, ...]) -> None:
        if self.pace is not None and POSTINGS["kernel"] not in postings:
            raise ConfigError(
                "--pace sets the offload kernel's pace: give --test swap-out or swap-in with --posting kernel or all"
            )

    @property
    def paces(self) -> Paces:
        """Each pace checked, once, in order (one line for one that cannot run)."""
        if self.pace is None:
            return (None,)
        from ..wire.offload import Pace  # the wrapper loads no library until a plan is made

        return tuple(dict.fromkeys(Pace.parse(text).label for text in self.pace.split(",")))


def offload_modes(test: str) -> dict[str, MemoryMode]:
    """An offload's ends where no mode is given: the GPU's pool and a pinned pool, in its direction."""
    kind = registry.find(test)
    if kind is None or kind.offload is None:
        return {}
    device, pinned = MemoryMode.DEVICE, MemoryMode.PINNED
    return (
        {"src_mode": device, "dst_mode": pinned} if kind.offload == "out" else {"src_mode": pinned, "dst_mode": device}
    )


def offload_postings(posting: str, needs_gpu: bool) -> tuple[Posting, ...]:
    """An offload's posting paths, in order: those --posting names that apply to this rank's own pool
    (all: every one); auto: the kernel where an end is the GPU's, else the CPU."""
    if posting == "auto":
        return (POSTINGS["kernel"],) if needs_gpu else (CPU,)
    found = parse_postings(posting, POOL)
    if "all" in (name.strip() for name in posting.split(",")):  # the paths that apply to these ends
        named = {name.strip() for name in posting.split(",")}
        found = tuple(path for path in found if path.name in named or (path != CPU) == needs_gpu)
    return found


def check_pattern(test: str, offload: str | None, pattern: str, own: bool) -> None:
    """An offload runs on rank 0 (pair) or on every rank at once (each); `each` is for offloads only."""
    if offload is not None and not own and pattern != "pair":
        raise ConfigError(f"--test {test} moves a rank's list to its own pool: --pattern pair (rank 0) or each")
    if offload is None and own:
        raise ConfigError(f"--pattern {pattern} runs every rank with itself: --test swap-out or swap-in")


def check_offload(
    test: str, direction: str, blocks: tuple[int | None, int], modes: tuple[MemoryMode, MemoryMode],
    postings: tuple[Posting, ...], sizes: list[int],
) -> None:  # fmt: skip
    """An offload: a block list (`blocks`: --blocks, --batch), one a step, between the rank's GPU and its
    pinned pool in its `direction`; the kernel's blocks of 16-byte words (`sizes`: the block sizes)."""
    if blocks[0] is None:
        raise ConfigError(f"--test {test} moves a block list: give --blocks N (or --model, --blocks-from)")
    if blocks[1] != 1:
        raise ConfigError(f"--test {test} moves one list a step: leave out --batch")
    if POSTINGS["kernel"] in postings and any(size % 16 for size in sizes):
        odd = next(size for size in sizes if size % 16)
        raise ConfigError(f"--posting kernel moves 16-byte words: --block-size {odd} is not a multiple of 16")
    check_offload_modes(test, direction, modes, postings)


def check_offload_modes(
    test: str, direction: str, modes: tuple[MemoryMode, MemoryMode], postings: tuple[Posting, ...]
) -> None:
    """An offload's ends: the GPU's pool and a pinned pool, in the test's direction (or host memory at
    both, which only the CPU copies); each mismatch one line."""
    src, dst = modes
    way = "out" if src.on_device and not dst.on_device else "in" if dst.on_device and not src.on_device else None
    ask = "--src-mode device --dst-mode pinned" if direction == "out" else "--src-mode pinned --dst-mode device"
    if src.on_device and dst.on_device:
        raise ConfigError(f"--test {test} moves a list between the GPU and host memory, not device to device: {ask}")
    if way is not None and way != direction:
        raise ConfigError(f"--test {test} moves the other way: {ask} (or leave the modes out)")
    gpu_paths = [path.name for path in postings if path != CPU]
    if way is None and gpu_paths:
        raise ConfigError(
            f"--posting {gpu_paths[0]} moves a list between the rank's GPU and its pinned pool: {ask}, or --posting cpu"
        )
    if way is not None and CPU in postings:
        raise ConfigError(
            "--posting cpu copies host memory with the CPU: with the GPU at one end, its request per block is direct"
        )
    host = dst if way == "out" else src
    if way is not None and not host.pinned_host:
        raise ConfigError(f"--test {test}'s host pool is pinned memory the GPU maps: {ask}")
