"""What a run measures: every option, checked before any rank starts.

A `RunConfig` is a few records, each of what one group of options decides and with its own check:
which links of which test (`What`), the memory of the ends (`Memory`), the sizes and the steps of a
measurement (`Steps`), block lists (`BlockLists`), what rank 0 writes and prints (`Output`) and the
verdict it ends with (`Verdict`). `RunConfig.check` adds what needs more than one of them and the
test kind; the kind and what a step moves (`shape`: messages, a block list or a model's handoff) are
resolved once. A field's name is its option's parameter and the key the
results file records it under (`summary`), so an option is a field of its record and nothing else."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import Any, TypeVar

from ..errors import ConfigError
from ..measure import blocktable, kvhandoff, plan, registry
from ..measure.beside import BesideLoads, asked
from ..measure.blocks import TABLE, BlockShape, SmBudget
from ..measure.kvhandoff import KV_LAYOUTS
from ..measure.postings import PEER, POSTINGS, Posting, parse_postings
from ..measure.shape import Shape
from ..modes import MemoryMode
from ..units import DISPLAY_UNITS, check_seconds, parse_sizes
from ..wire.native import RMA_GET
from ..wire.staging import DEFAULT_BUFFERS, DEFAULT_CHUNK, Staging
from .offloadconfig import Offload, Paces, check_offload, check_pattern, offload_modes, offload_postings
from .schedule import LINK_CLASSES, Pattern, pattern_named
from .sizes import DEFAULT_SIZES, handoff_of, refuse_handoff_options, sizes_of, table_of

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
class What:
    """Which test, over which links."""

    test: str = "bw"
    pattern: str = "pair"
    link_class: str = "all"
    concurrent: bool = False
    root: int = 0
    # The rails (RDMA ports or network interfaces) ranks choose their device among; () = automatic.
    nics: tuple[str, ...] = ()
    # screen: re-measure alone every link below this share of its link class's median (0: none).
    remeasure_below: float = 0.8
    beside: str = "none"  # a model's compute on every rank's GPU beside the links: RunConfig.beside resolves it

    def check(self, pattern: Pattern) -> None:
        """`pattern`: the record of the pattern named (RunConfig.pattern)."""
        if self.link_class not in LINK_CLASSES:
            raise ConfigError(f"unknown link class {self.link_class!r}: choose one of {', '.join(LINK_CLASSES)}")
        if self.concurrent and not pattern.packs:
            raise ConfigError("--concurrent schedules all-pairs; the other patterns are concurrent already")
        if not 0 <= self.remeasure_below < 1:
            raise ConfigError(
                f"--remeasure-below is a share of the class median, from 0 (none) to below 1, not {self.remeasure_below}"
            )
        if self.root < 0:
            raise ConfigError(f"--root must be a rank, not {self.root}")


@dataclass
class Memory:
    """The memory of each end, and how much of it may be page-locked and how it is staged."""

    src_mode: MemoryMode = MemoryMode.PAGEABLE
    dst_mode: MemoryMode = MemoryMode.PAGEABLE
    max_pinned: int | None = None  # bytes of page-locked memory a rank may hold
    stage_chunk: int = DEFAULT_CHUNK  # staged mode: bytes per pinned staging buffer
    stage_buffers: int = DEFAULT_BUFFERS  # staged mode: pinned buffers per direction of a link
    require_gdr: bool = False

    def check(self) -> None:
        if (self.stage_chunk, self.stage_buffers) != (DEFAULT_CHUNK, DEFAULT_BUFFERS) and self.staged is None:
            raise ConfigError("--chunk-size and --stage-buffers shape staged and bounce modes; no end here stages")
        self.staging.check()

    @property
    def modes(self) -> tuple[MemoryMode, MemoryMode]:
        return self.src_mode, self.dst_mode

    @property
    def staged(self) -> MemoryMode | None:
        """The first end's mode that moves through pinned chunks, if any."""
        return next((mode for mode in self.modes if mode.staged), None)

    @property
    def staging(self) -> Staging:
        return Staging(self.stage_chunk, self.stage_buffers)


@dataclass
class Steps:
    """The sizes, and how each is measured: the window, the steps, the samples, the checks, the engine."""

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
    engine: str = "auto"
    remeasure_host_copy: bool = False  # measure each host's memory copy again, not take this boot's figure

    def check(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown engine {self.engine!r}: choose one of {', '.join(ENGINES)}")
        for name, (option, low, high) in _LIMITS.items():
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise ConfigError(f"{option} must be between {low} and {high}, not {value}")
        check_seconds(self.sample_time, "--sample-time", 3600)
        if self.timeout is not None:
            check_seconds(self.timeout, "--timeout", 86400)
        if not self.sizes:
            raise ConfigError("no message sizes given")
        if self.one_buffer and self.validate:
            raise ConfigError(
                "--one-buffer lands every message of a window in one buffer, so none can be checked: add --no-validate"
            )


@dataclass
class BlockLists:
    """Block lists (KV-cache shaped transfers): blocks per transfer (None: plain messages), their layout
    in each pool, transfers in flight per step, each end's pool in bytes (None: as the layout needs),
    who posts a one-sided list of device memory; a KV-cache handoff (--model: the model's KV shape as
    kvhandoff.ModelConfig's dict, the engine's cache layout, the prompt in tokens) sets the blocks."""

    blocks: int | None = None
    layout: str = "contiguous"
    batch: int = 1
    pool: int | None = None
    posting: str = "auto"  # postings.POSTINGS, a list of them, or all: each path in turn
    posting_sms: str | None = None  # the SMs the GPU's posting kernel may take: blocks.SmBudget
    merge: bool = True  # CPU-posted lists: blocks adjacent at both ends in one request (--no-merge: one a block)
    # A block table replayed from a file (--blocks-from): its absolute path and the digest the launcher
    # checked; it sets the blocks, the transfers (batch) and the block size.
    blocks_from: str | None = None
    blocks_from_sha256: str | None = None
    model: kvhandoff.ModelRecord | None = None
    kv_layout: str = KV_LAYOUTS[0]
    prompt: int | None = None

    def check(
        self, sizes: list[int], get: bool = False, postings: tuple[Posting, ...] | None = None, paces: Paces = (None,)
    ) -> None:
        """The handoff's options go with --model, the shape's with --blocks; every size fits the shape."""
        found = self.handoff
        if found is None:
            refuse_handoff_options(self.kv_layout, self.prompt)
        if found is not None and (self.blocks != found.count or sizes != [found.block_bytes]):
            raise ConfigError(
                f"--model {found.model.name} posts {found.count} descriptors of {found.block_bytes} bytes: "
                "leave out --blocks and --block-size"
            )
        shapes = self.shapes(get, postings, paces)
        if not shapes:
            if (self.layout, self.batch, self.pool, self.posting, self.posting_sms, self.merge) != (
                "contiguous", 1, None, "auto", None, True,
            ):  # fmt: skip
                raise ConfigError(
                    "--layout, --batch, --pool, --posting, --posting-sms and --no-merge shape block lists: give "
                    "--blocks N as well"
                )
            return
        table = shapes[0].table
        if table is not None and (self.blocks, self.batch, sizes) != (table.count, table.transfers, [table.block_size]):
            raise ConfigError(f"--blocks-from {table.source} sets the blocks, the transfers and the block size")
        for size in sizes:
            shapes[0].check_fits(size)
        postings = self.postings if postings is None else postings
        if shapes[0].budget is not None and not any(posting.takes_sms for posting in postings):
            held = sorted(
                (p for p in POSTINGS.values() if p.takes_sms and PEER in p.far), key=lambda p: p.posts_as is not None
            )
            held_names = ", ".join(p.name for p in held)  # the paths themselves first, then auto
            raise ConfigError(f"--posting-sms holds the GPU's posting kernel: give --posting {held_names} or all")

    @property
    def handoff(self) -> kvhandoff.Handoff | None:
        if self.model is None:
            return None
        return kvhandoff.from_record(self.model, self.kv_layout, self.prompt)

    @property
    def postings(self) -> tuple[Posting, ...]:
        """The posting paths this run measures, in order (all: every path), as their records."""
        return parse_postings(self.posting)

    def shapes(
        self, get: bool = False, postings: tuple[Posting, ...] | None = None, paces: Paces = (None,)
    ) -> list[BlockShape]:
        """The block list, one shape a posting path (the offload kernel: one a pace) (none: plain
        messages); `get`: the test reads the peer's pool (a table's local end, the one that posts, is
        then the receiver). `postings`: the paths (default: --posting's to a peer); `paces`: the offload
        kernel's (Offload.paces)."""
        if self.blocks is None:
            return []
        postings = self.postings if postings is None else postings
        budget = SmBudget.parse(self.posting_sms) if self.posting_sms else None
        found = self.handoff
        if found is not None:
            return [
                replace(found.shape(self.layout, self.batch, self.pool, posting, self.merge, budget), pace=pace)
                for posting in postings
                for pace in (paces if posting.name == "kernel" else (None,))
            ]
        layout, table = self.layout, None
        if self.blocks_from is not None:
            table = blocktable.load(self.blocks_from, self.blocks_from_sha256).oriented(get)
            layout = TABLE
        return [
            BlockShape(
                self.blocks,
                layout,
                self.batch,
                self.pool,
                posting=posting,
                merge=self.merge,
                table=table,
                budget=budget,
                pace=pace,
            ).check()
            for posting in postings
            for pace in (paces if posting.name == "kernel" else (None,))
        ]


@dataclass
class Output:
    """What rank 0 writes (the results file) and prints (its format, units and progress lines)."""

    output: str | None = None
    force: bool = False
    output_format: str = "table"
    units: str = "GB/s"
    progress: str = "auto"

    def check(self) -> None:
        if self.units not in UNITS:
            raise ConfigError(f"unknown units {self.units!r}: choose {', '.join(UNITS)}")
        if self.progress not in PROGRESS:
            raise ConfigError(f"unknown --progress {self.progress!r}: choose {', '.join(PROGRESS)}")
        if self.output_format not in OUTPUT_FORMATS:
            raise ConfigError(f"unknown format {self.output_format!r}: choose table, json or csv")


@dataclass
class Verdict:
    """Floors (share of the physical limit) per limit kind or link class: a verdict at the end of the run."""

    expect: dict[str, float] = field(default_factory=dict)
    model_budget: float = 1.05  # the answer's budget: the model's slowdown a posting path may cost (--model-budget)

    def check(self) -> None:
        """A floor given other than through results.verdict.parse_expect (a library caller's) is checked too."""
        if not 1 < self.model_budget <= 11:
            raise ConfigError(f"--model-budget: a slowdown factor above 1 and at most 11, not {self.model_budget}")
        for key, share in self.expect.items():
            if not 0 < share <= 1:
                raise ConfigError(
                    f"--expect {key}={share}: the floor is a share of the physical limit, above 0 and at most 1"
                )


_Record = TypeVar("_Record", What, Memory, Steps, BlockLists, Offload, Output, Verdict)


def _take(record: type[_Record], values: Mapping[str, Any]) -> _Record:
    """The record from the values named as its fields (the others: their defaults)."""
    return record(**{item.name: values[item.name] for item in fields(record) if item.name in values})


# The settings as results files have recorded them, in this order (a field added later follows).
_RECORDED = (
    "test src_mode dst_mode sizes window passes one_buffer iterations warmup samples sample_time timeout validate "
    "output force output_format units progress pattern link_class concurrent root nics remeasure_below max_pinned "
    "stage_chunk stage_buffers require_gdr engine blocks layout batch pool posting model kv_layout prompt expect"
).split()
# Settings added later, recorded only where a run sets them: a run without them records what it did before.
_RECORDED_WHEN_SET = {
    "posting_sms": None, "beside": "none", "merge": True, "blocks_from": None, "blocks_from_sha256": None,
    "remeasure_host_copy": False,
    "model_budget": 1.05, "pace": None,
}  # fmt: skip


_RECORDS = ("what", "memory", "steps", "lists", "offload", "out", "verdict")  # RunConfig's records


@dataclass
class RunConfig:
    what: What = field(default_factory=What)
    memory: Memory = field(default_factory=Memory)
    steps: Steps = field(default_factory=Steps)
    lists: BlockLists = field(default_factory=BlockLists)
    offload: Offload = field(default_factory=Offload)
    out: Output = field(default_factory=Output)
    verdict: Verdict = field(default_factory=Verdict)
    command_line: str = ""

    @classmethod
    def from_options(cls, options: Mapping[str, Any], command_line: str = "") -> RunConfig:
        """The configuration from the command line's options, parsed (sizes in bytes, modes as
        MemoryMode), each under its field's name; a missing one takes its default. --mode sets both
        ends, -b/-e/-f or --model the sizes, --model the blocks; then everything is checked."""
        given = dict(options)
        mode = options.get("mode") or MemoryMode.PAGEABLE
        given["src_mode"] = options.get("src_mode") or mode
        given["dst_mode"] = options.get("dst_mode") or mode
        if not any(options.get(key) for key in ("mode", "src_mode", "dst_mode")):
            given.update(offload_modes(str(options.get("test") or "")))
        handoff = handoff_of(options)
        if handoff is not None:
            given["blocks"], given["model"] = handoff.count, handoff.model.to_dict()
        table = table_of(options)
        if table is not None:  # the ranks read the file again, and refuse it if it changed
            given.update(blocks=table.count, batch=table.transfers, blocks_from=os.path.abspath(options["blocks_from"]))
            given["blocks_from_sha256"] = table.sha256
        given["sizes"] = sizes_of(options, handoff, table)
        return cls._of(given, command_line).check()

    @classmethod
    def _of(cls, values: Mapping[str, Any], command_line: str) -> RunConfig:
        return cls(
            what=_take(What, values),
            memory=_take(Memory, values),
            steps=_take(Steps, values),
            lists=_take(BlockLists, values),
            offload=_take(Offload, values),
            out=_take(Output, values),
            verdict=_take(Verdict, values),
            command_line=command_line,
        )

    @cached_property
    def kind(self) -> registry.TestKind:
        """The test kind, looked up once (an unknown test is refused here)."""
        return registry.get(self.what.test)

    @cached_property
    def pattern(self) -> Pattern:
        """The pattern's record, looked up once (an unknown pattern is refused here, naming the choices)."""
        return pattern_named(self.what.pattern)

    @property
    def one_at_a_time(self) -> bool:
        """Links measured alone, one a round: pair, or all-pairs without --concurrent."""
        return not self.pattern.concurrent and not self.what.concurrent

    def check(self) -> RunConfig:
        kind = self.kind
        self.what.check(self.pattern)
        for record in (self.memory, self.steps, self.out, self.verdict):
            record.check()
        self.lists.check(self.steps.sizes, self._get, self.postings, self.offload.paces)
        self.offload.check(self.postings)
        check_pattern(self.what.test, kind.offload, self.pattern.name, self.pattern.own)
        if not self.one_at_a_time and not kind.concurrent:
            raise ConfigError(
                f"--test {self.what.test} measures one link at a time: use it with --pattern pair or all-pairs without --concurrent"
            )
        for mode in dict.fromkeys(self.modes):
            reason = kind.refuse_mode(mode)
            if reason:
                raise ConfigError(f"--test {self.what.test} cannot use {mode.value} memory: {reason}")
        if kind.offload is not None:
            lists = (self.lists.blocks, self.lists.batch)
            check_offload(self.what.test, kind.offload, lists, self.modes, self.postings, self.steps.sizes)
        if kind.one_sided and self.steps.engine == "python":
            raise ConfigError(f"--test {self.what.test} runs in the native loop only: use --engine auto or native")
        if kind.offload is None:
            self._check_blocks(kind)
        self._check_beside(kind)
        self._check_one_buffer(kind)
        if self.verdict.expect and not kind.higher_is_better:
            # Floors are shares of a link's limit, for figures where more is better: they would judge
            # no link, and a verdict on nothing is none. Said before anything is measured.
            raise ConfigError(
                f"--expect judges bandwidth against a share of the link's limit; --test {self.what.test} measures "
                f"{kind.unit} (lower is better), so no floor applies: compare runs with `rdmabench check --baseline`"
            )
        return self

    def _check_one_buffer(self, kind: registry.TestKind) -> None:
        if not self.steps.one_buffer:
            return
        if kind.one_sided or not kind.protocol.windowed or self.lists.blocks is not None:
            raise ConfigError(
                f"--one-buffer shapes the window of bw and bibw, not of --test {self.what.test}"
                + (" with --blocks" if self.lists.blocks is not None and not kind.one_sided else "")
            )
        if self.memory.staged is not None:
            raise ConfigError(
                f"--one-buffer cannot use {self.memory.staged.value} memory: its pinned chunks are buffers of their own"
            )

    def _check_blocks(self, kind: registry.TestKind) -> None:
        if self.lists.blocks is None:
            return
        if kind.block_op is None:
            raise ConfigError(f"--blocks moves the bytes of put, get or bw, not of --test {self.what.test}")
        if not self.one_at_a_time:
            raise ConfigError(
                "--blocks measures one link at a time: use --pattern pair or all-pairs without --concurrent"
            )
        if self.steps.engine == "python":
            raise ConfigError("--blocks runs in the native loop only: use --engine auto or native")
        if self.memory.staged is not None:
            raise ConfigError(
                f"--blocks cannot use {self.memory.staged.value} memory: its pinned chunks are not the pool's memory"
            )
        postings = self.lists.postings
        if (any(posting.device for posting in postings) or len(postings) > 1) and not self.device_lists:
            raise ConfigError(
                f"--posting {self.lists.posting} posts puts and gets of device memory: use --test put or get, "
                "--mode device"
            )
        budget = self.shape.lists[0].budget
        if budget is not None and budget.green and self.beside is None:
            raise ConfigError(
                "--posting-sms green:N splits the GPU between the transfer and --beside's load: give --beside"
            )

    def _check_beside(self, kind: registry.TestKind) -> None:
        """A compute load beside the transfer: device memory at both ends, one link at a time, a bandwidth test."""
        if self.beside is None:
            return
        if not all(mode.on_device for mode in self.modes) and not (kind.offload and self.needs_gpu):
            raise ConfigError("--beside runs a model's compute on each rank's GPU: use --mode device at both ends")
        if not kind.is_bandwidth:
            raise ConfigError(f"--beside slows a transfer's GB/s, not --test {self.what.test}'s {kind.unit}")
        if not self.one_at_a_time:
            raise ConfigError(
                "--beside measures one link at a time: use --pattern pair or all-pairs without --concurrent"
            )
        budget = self.shape.lists[0].budget if self.shape.lists else None
        if budget is not None and budget.green and any(self.beside.carveouts):
            raise ConfigError("--posting-sms green:N and a --beside carve-out both set the transfer's SMs: give one")

    @cached_property
    def beside(self) -> BesideLoads | None:
        """The compute loads beside the links (--beside: a load and size, every carve-out asked for), read
        once (an unknown load or a bad size is refused here); None: none."""
        return asked(self.what.beside)

    @cached_property
    def postings(self) -> tuple[Posting, ...]:
        """The posting paths this run measures, each resolved to its record once (an offload's: offload_postings)."""
        if self.kind.offload is not None:
            return offload_postings(self.lists.posting, self.needs_gpu)
        return self.lists.postings

    @property
    def _get(self) -> bool:
        return self.kind.block_op == RMA_GET

    @cached_property
    def shape(self) -> Shape:
        """What a step moves, resolved once: messages, or a block list (a model's handoff) a posting path."""
        shapes = self.lists.shapes(self._get, self.postings, self.offload.paces)
        return Shape(tuple(shapes), self.lists.handoff, self.device_lists)

    @property
    def device_lists(self) -> bool:
        """Whether the GPU may post this run's block lists or copy them for their ceiling: one-sided,
        device memory at both ends (the UCX context then gives its endpoints a device lane)."""
        device = all(mode.ucx_memory == "cuda" for mode in self.modes)
        return self.lists.blocks is not None and self.kind.one_sided and device

    @property
    def staging(self) -> Staging:
        return self.memory.staging

    @property
    def modes(self) -> tuple[MemoryMode, MemoryMode]:
        return self.memory.modes

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

    def _flat(self) -> dict[str, object]:
        """Every field of every record under its own name, in the order results files record them."""
        values: dict[str, object] = {}
        for name in _RECORDS:
            values.update(asdict(getattr(self, name)))
        values["src_mode"], values["dst_mode"] = self.memory.src_mode.value, self.memory.dst_mode.value
        ordered = {name: values.pop(name) for name in _RECORDED if name in values}
        return {**ordered, **values, "command_line": self.command_line}

    def to_json(self) -> str:
        return json.dumps(self._flat())

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ConfigError("a run's configuration must be a JSON object")
        data["src_mode"] = MemoryMode.parse(str(data["src_mode"]))
        data["dst_mode"] = MemoryMode.parse(str(data["dst_mode"]))
        data["nics"] = tuple(data.get("nics") or ())
        return cls._of(data, str(data.pop("command_line", ""))).check()

    def summary(self) -> dict[str, object]:
        """The settings as recorded in a results file."""
        data = json.loads(self.to_json())
        data.pop("command_line")
        data.pop("force")
        for name, default in _RECORDED_WHEN_SET.items():  # later settings: recorded where a run used them
            if data.get(name) == default:
                data.pop(name)
        return data
