"""What a run measures: every option, checked before any rank starts."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigError
from ..measure import kvhandoff, plan, registry
from ..measure.blocks import BlockShape
from ..modes import MemoryMode
from ..units import DISPLAY_UNITS, parse_sizes
from ..wire.staging import DEFAULT_BUFFERS, DEFAULT_CHUNK, Staging
from .schedule import LINK_CLASSES, pattern_named

DEFAULT_SIZES = "1:64MiB:x4"
DEFAULT_BLOCK_SIZES = "4KiB:1MiB:x4"  # --blocks without --block-size: KV-cache block sizes
OUTPUT_FORMATS = ("table", "json", "csv")
# What the table prints for patterns: a line per link, a line per round, or per link up to this many links.
PROGRESS = ("auto", "links", "rounds")
PER_LINK_UP_TO = 64
# Who runs the timed part of a bw or lat step: the native loop (rdmabench/native), Python, or the
# native loop where it can be built.
ENGINES = ("auto", "native", "python")
UNITS = tuple(DISPLAY_UNITS)

# field: (option, lowest, highest)
_LIMITS = {
    "window": ("--window", 1, 65536),
    "passes": ("--passes", 1, 1_000_000),
    "iterations": ("--iters", 1, 10_000_000),
    "warmup": ("--warmup", 0, 1_000_000),
    "samples": ("--samples", 1, 10_000),
}


@dataclass
class RunConfig:
    test: str = "bw"
    src_mode: MemoryMode = MemoryMode.PAGEABLE
    dst_mode: MemoryMode = MemoryMode.PAGEABLE
    sizes: list[int] = field(default_factory=lambda: parse_sizes(DEFAULT_SIZES))
    window: int | None = None
    passes: int | None = None  # windows (round trips) per step; None: measure.plan.default_passes
    # Every message of a window in one buffer per end (ucx_perftest's and osu_bw's layout), unchecked.
    one_buffer: bool = False
    iterations: int | None = None
    warmup: int | None = None
    samples: int = 5
    sample_time: float = 0.05
    timeout: float | None = None
    validate: bool = True
    output: str | None = None
    force: bool = False
    output_format: str = "table"
    units: str = "GB/s"
    progress: str = "auto"
    pattern: str = "pair"
    link_class: str = "all"
    concurrent: bool = False
    root: int = 0
    # The rails (RDMA ports or network interfaces) ranks choose their device among; () = automatic.
    nics: tuple[str, ...] = ()
    # screen: re-measure alone every link below this share of its link class's median (0: none).
    remeasure_below: float = 0.8
    max_pinned: int | None = None  # bytes of page-locked memory a rank may hold
    stage_chunk: int = DEFAULT_CHUNK  # staged mode: bytes per pinned staging buffer
    stage_buffers: int = DEFAULT_BUFFERS  # staged mode: pinned buffers per direction of a link
    require_gdr: bool = False
    engine: str = "auto"
    # Block lists (KV-cache shaped transfers): blocks per transfer (None: plain messages), their layout
    # in each pool, transfers in flight per step, each end's pool in bytes (None: as the layout needs).
    blocks: int | None = None
    layout: str = "contiguous"
    batch: int = 1
    pool: int | None = None
    posting: str = "auto"  # who posts a one-sided list of device memory: blocks.POSTINGS
    # A KV-cache handoff (--model): the model's KV shape (kvhandoff.ModelConfig as a dict), the
    # engine's cache layout and the prompt in tokens; they set --blocks and the block size.
    model: dict[str, Any] | None = None
    kv_layout: str = "vllm"
    prompt: int | None = None
    # Floors (share of the physical limit) per limit kind or link class: a verdict at the end of the run.
    expect: dict[str, float] = field(default_factory=dict)
    command_line: str = ""

    def check(self) -> RunConfig:
        kind = registry.get(self.test)
        pattern = pattern_named(self.pattern)
        if self.link_class not in LINK_CLASSES:
            raise ConfigError(f"unknown link class {self.link_class!r}: choose one of {', '.join(LINK_CLASSES)}")
        concurrent = pattern.concurrent or self.concurrent
        if concurrent and not kind.concurrent:
            raise ConfigError(
                f"--test {self.test} measures one link at a time: use it with --pattern pair or all-pairs without --concurrent"
            )
        for mode in dict.fromkeys(self.modes):
            reason = kind.refuse_mode(mode)
            if reason:
                raise ConfigError(f"--test {self.test} cannot use {mode.value} memory: {reason}")
        if kind.one_sided and self.engine == "python":
            raise ConfigError(f"--test {self.test} runs in the native loop only: use --engine auto or native")
        self._check_blocks(kind)
        self._check_one_buffer(kind)
        if (self.stage_chunk, self.stage_buffers) != (DEFAULT_CHUNK, DEFAULT_BUFFERS) and not any(
            mode.staged for mode in self.modes
        ):
            raise ConfigError("--chunk-size and --stage-buffers shape staged and bounce modes; no end here stages")
        if self.concurrent and not pattern.packs:
            raise ConfigError("--concurrent schedules all-pairs; the other patterns are concurrent already")
        if not 0 <= self.remeasure_below < 1:
            raise ConfigError(
                f"--remeasure-below is a share of the class median, from 0 (none) to below 1, not {self.remeasure_below}"
            )
        if self.root < 0:
            raise ConfigError(f"--root must be a rank, not {self.root}")
        if self.units not in UNITS:
            raise ConfigError(f"unknown units {self.units!r}: choose {', '.join(UNITS)}")
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown engine {self.engine!r}: choose one of {', '.join(ENGINES)}")
        if self.progress not in PROGRESS:
            raise ConfigError(f"unknown --progress {self.progress!r}: choose {', '.join(PROGRESS)}")
        if self.output_format not in OUTPUT_FORMATS:
            raise ConfigError(f"unknown format {self.output_format!r}: choose table, json or csv")
        for name, (option, low, high) in _LIMITS.items():
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise ConfigError(f"{option} must be between {low} and {high}, not {value}")
        if not 0 < self.sample_time <= 3600:
            raise ConfigError(f"--sample-time must be above 0 and at most 3600 seconds, not {self.sample_time}")
        if self.timeout is not None and not 0 < self.timeout <= 86400:
            raise ConfigError(f"--timeout must be above 0 and at most 86400 seconds, not {self.timeout}")
        if not self.sizes:
            raise ConfigError("no message sizes given")
        if self.expect and not kind.higher_is_better:
            # Floors are shares of a link's limit, for figures where more is better: they would judge
            # no link, and a verdict on nothing is none. Said before anything is measured.
            raise ConfigError(
                f"--expect judges bandwidth against a share of the link's limit; --test {self.test} measures "
                f"{kind.unit} (lower is better), so no floor applies: compare runs with `rdmabench check --baseline`"
            )
        self.staging.check()
        return self

    def _check_one_buffer(self, kind: registry.TestKind) -> None:
        if not self.one_buffer:
            return
        if self.validate:
            raise ConfigError(
                "--one-buffer lands every message of a window in one buffer, so none can be checked: add --no-validate"
            )
        if kind.one_sided or not kind.protocol.windowed or self.blocks is not None:
            raise ConfigError(
                f"--one-buffer shapes the window of bw and bibw, not of --test {self.test}"
                + (" with --blocks" if self.blocks is not None and not kind.one_sided else "")
            )
        staged = next((mode for mode in self.modes if mode.staged), None)
        if staged is not None:
            raise ConfigError(
                f"--one-buffer cannot use {staged.value} memory: its pinned chunks are buffers of their own"
            )

    def _check_model(self) -> None:
        """A handoff's options go with --model, whose descriptors are the blocks the run moves."""
        if self.model is None:
            if (self.kv_layout, self.prompt) != ("vllm", None):
                raise ConfigError("--kv-layout and --prompt shape a model's handoff: give --model as well")
            return
        found = self.handoff
        assert found is not None
        if self.blocks != found.count or self.sizes != [found.block_bytes]:
            raise ConfigError(
                f"--model {found.model.name} posts {found.count} descriptors of {found.block_bytes} bytes: "
                "leave out --blocks and --block-size"
            )

    @property
    def handoff(self) -> kvhandoff.Handoff | None:
        if self.model is None:
            return None
        return kvhandoff.from_record(self.model, self.kv_layout, self.prompt)

    def _check_blocks(self, kind: registry.TestKind) -> None:
        self._check_model()
        shape = self.block_shape
        if shape is None:
            if (self.layout, self.batch, self.pool, self.posting) != ("contiguous", 1, None, "auto"):
                raise ConfigError("--layout, --batch, --pool and --posting shape block lists: give --blocks N as well")
            return
        if kind.block_op is None:
            raise ConfigError(f"--blocks moves the bytes of put, get or bw, not of --test {self.test}")
        if pattern_named(self.pattern).concurrent or self.concurrent:
            raise ConfigError(
                "--blocks measures one link at a time: use --pattern pair or all-pairs without --concurrent"
            )
        if self.engine == "python":
            raise ConfigError("--blocks runs in the native loop only: use --engine auto or native")
        staged = next((mode for mode in self.modes if mode.staged), None)
        if staged is not None:
            raise ConfigError(f"--blocks cannot use {staged.value} memory: its pinned chunks are not the pool's memory")
        for size in self.sizes:
            shape.check_fits(size)
        if self.posting == "gpu" and not self.device_lists:
            raise ConfigError(
                "--posting gpu posts puts and gets of device memory: use --test put or get, --mode device"
            )

    @property
    def block_shape(self) -> BlockShape | None:
        if self.blocks is None:
            return None
        found = self.handoff
        if found is not None:
            return found.shape(self.layout, self.batch, self.pool, self.posting)
        return BlockShape(self.blocks, self.layout, self.batch, self.pool, posting=self.posting).check()

    @property
    def device_lists(self) -> bool:
        """Whether the GPU may post this run's block lists or copy them for their ceiling: one-sided,
        device memory at both ends (the UCX context then gives its endpoints a device lane)."""
        kind = registry.get(self.test)
        device = all(mode.ucx_memory == "cuda" for mode in (self.src_mode, self.dst_mode))
        return self.blocks is not None and kind.one_sided and device

    @property
    def staging(self) -> Staging:
        return Staging(self.stage_chunk, self.stage_buffers)

    @property
    def modes(self) -> tuple[MemoryMode, MemoryMode]:
        return self.src_mode, self.dst_mode

    @property
    def memory_class(self) -> str:
        """What the links' ends hold, for the default window: GPU memory at both (a deep window),
        host memory at both (a CPU copies: a cache-sized window), or one of each."""
        if all(mode.record.gpu_direct for mode in self.modes):
            return plan.DEVICE
        if all(mode.cpu_copied for mode in self.modes):
            return plan.HOST
        return plan.MIXED

    @property
    def needs_gpu(self) -> bool:
        return any(mode.needs_gpu for mode in self.modes)

    def to_json(self) -> str:
        data = asdict(self)
        data["src_mode"], data["dst_mode"] = self.src_mode.value, self.dst_mode.value
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        data: dict[str, Any] = json.loads(text)
        data["src_mode"] = MemoryMode.parse(data["src_mode"])
        data["dst_mode"] = MemoryMode.parse(data["dst_mode"])
        data["nics"] = tuple(data.get("nics") or ())
        return cls(**data).check()

    def summary(self) -> dict[str, Any]:
        """The settings as recorded in a results file."""
        data = json.loads(self.to_json())
        data.pop("command_line")
        data.pop("force")
        return data
