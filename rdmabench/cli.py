"""The command line: a thin click layer over the library. Library errors become one line and an exit code."""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import click

from . import __version__, userfiles
from .bench.copy import HOST_KINDS
from .errors import (
    ConfigError,
    LaunchError,
    RdmabenchError,
    ResourceError,
    ResultsWriteError,
    error_line,
)
from .escape import visible, visible_lines
from .job.config import DEFAULT_BLOCK_SIZES, DEFAULT_SIZES, RunConfig
from .measure import kvhandoff, registry
from .modes import MemoryMode
from .results import document
from .results.verdict import DEFAULT_FLOORS, parse_expect
from .units import parse_size, parse_sizes

_MODES = "|".join(m.value for m in MemoryMode)


def _test_names() -> str:
    """The tests registered, for --help (a plugin that failed is named in the help; a run refuses)."""
    return "|".join(registry.loaded_names())


def _test_help() -> str:
    known = "; ".join(f"{kind.name}: {kind.summary}" for kind in map(registry.find, registry.loaded_names()) if kind)
    problem = registry.plugin_problem()
    return known + "." + (f" Not available: {problem}." if problem else "")


def _say(text: str) -> None:
    """A benchmark's progress line: GPU, NIC and file names in it reach the terminal shown, never raw."""
    click.echo(visible_lines(text))


def _fail(exc: RdmabenchError) -> None:
    click.echo(error_line(str(exc)), err=True)
    sys.exit(exc.exit_code)


class _Written(NamedTuple):
    """A file a command writes, named by an option: its flags, its parameter, and what it holds."""

    flags: tuple[str, ...]
    dest: str
    holds: str  # for the refusal: "cannot write <holds> to PATH: ..."
    help: str


def _writes(*targets: _Written, checked_here: bool = True) -> Callable[[Any], Any]:
    """The options naming the files a command writes, and one --force for them all. Each named file
    is checked (`userfiles.check_output`: no device, FIFO, directory, dangling link or missing folder;
    an existing file only with --force) before the command does anything, so nothing is measured or
    computed for a file that cannot be written. `checked_here=False`: the command checks in the
    library (run: under mpirun every rank parses the command line, and only rank 0 writes)."""

    def decorate(command: Any) -> Any:
        @functools.wraps(command)
        def checked(**kwargs: Any) -> Any:
            try:
                for target in targets if checked_here else ():
                    if kwargs.get(target.dest) is not None:
                        userfiles.check_output(kwargs[target.dest], kwargs["force"], target.holds)
            except RdmabenchError as exc:
                _fail(exc)
            return command(**kwargs)

        names = " and ".join(target.flags[0] for target in targets)
        replace = f"Replace {names} if it exists." if len(targets) == 1 else f"Replace the files {names} name."
        options = [click.option(*t.flags, t.dest, default=None, metavar="FILE", help=t.help) for t in targets]
        options.append(click.option("--force", is_flag=True, help=replace))
        for option in reversed(options):
            checked = option(checked)
        return checked

    return decorate


class _OneLineErrors(click.Group):
    """Every error as one line and an exit code: click's usage errors (not a Usage: block) and the
    library's RdmabenchError, which commands let rise to here rather than catch themselves."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        problem = registry.plugin_problem()
        if problem and {"-h", "--help"} & set(sys.argv[1:]):  # a run refuses with it; help goes on, and says so
            click.echo(f"rdmabench: warning: {problem}", err=True)
        try:
            code = super().main(*args, **kwargs)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "rdmabench"
            click.echo(error_line(f"{exc.format_message()} (see {command} --help)"), err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo(error_line("aborted"), err=True)
            sys.exit(130)
        except click.ClickException as exc:
            click.echo(error_line(exc.format_message()), err=True)
            sys.exit(exc.exit_code)
        except RdmabenchError as exc:  # the library's errors, caught once, here at the edge
            _fail(exc)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="rdmabench")
def main() -> None:
    """Measure how fast data really moves between GPUs, host memory and nodes, over UCX.

    Every bandwidth is in GB/s = 1e9 bytes/s, timed until the receiver has every byte, with every
    payload checked, and with the transport UCX actually chose recorded beside it.
    """


@main.command(context_settings={"show_default": True})
@click.option(
    "--np",
    "np_",
    type=int,
    default=None,
    help="Start this many local ranks with mpiexec. [default: 2 when not launched by mpirun/srun]",
)
@click.option(
    "--test",
    default="bw",
    metavar=_test_names(),
    help=_test_help(),
)
@click.option(
    "--pattern",
    default="pair",
    metavar="pair|all-pairs|ring|incast|fan-out|bisection|screen",
    help="Which links: ranks 0 and 1; every ordered pair, one at a time; every rank to the next at once; "
    "all to --root; --root to all; the two halves of the job at once; a cluster screen (a ring in every "
    "host, every pair of hosts rail-aligned, slow links re-measured alone).",
)
@click.option(
    "--remeasure-below",
    type=float,
    default=0.8,
    show_default=True,
    metavar="SHARE",
    help="For screen: re-measure alone every link below this share of its link class's median (0: none).",
)
@click.option(
    "--links",
    "link_class",
    default="all",
    metavar="all|intra-node|inter-node",
    help="For all-pairs: only links within a node, or only between nodes.",
)
@click.option(
    "--concurrent",
    is_flag=True,
    help="For all-pairs: measure disjoint pairs at once, in N-1 rounds per direction, instead of one link at a time.",
)
@click.option("--root", default=0, help="The rank incast sends to and fan-out sends from.")
@click.option(
    "--nics",
    default=None,
    metavar="DEV[,DEV...]",
    help="The rails to send through: RDMA ports (mlx5_0:1) or network interfaces (eth1). Each rank takes "
    "the one nearest its GPU, ties by local rank (rank i of a host takes rail i), and UCX is told "
    "(UCX_NET_DEVICES). [default: the active RDMA ports; without them UCX chooses]",
)
@click.option(
    "--mode",
    default="pageable",
    metavar=_MODES,
    help="Memory of both sides: pageable host; pinned (page-locked) host; device (GPU memory handed to UCX: "
    "CUDA IPC, GPUDirect RDMA); managed (cudaMallocManaged); mapped (pinned host memory mapped into the GPU); "
    "staged (GPU memory sent through pinned chunks, double-buffered on a copy stream); bounce (GPU memory "
    "sent through one message-sized pinned buffer, unpipelined); ucx (one-sided tests: host memory UCX allocates, "
    "as ucx_perftest's).",
)
@click.option("--src-mode", default=None, metavar=_MODES, help="Memory of the sending rank (0); overrides --mode.")
@click.option("--dst-mode", default=None, metavar=_MODES, help="Memory of the receiving rank (1); overrides --mode.")
@click.option(
    "--sizes",
    default=DEFAULT_SIZES,
    help="Message sizes: a list (8,1MiB,64MiB), a power-of-two range (1:64MiB), or a range with a step (1:64MiB:x4). KiB/MiB/GiB (or K/M/G) are binary; kB/MB/GB are decimal.",
)
@click.option("-b", "--min-size", default=None, metavar="SIZE", help="nccl-tests style: smallest size (with -e, -f).")
@click.option("-e", "--max-size", default=None, metavar="SIZE", help="nccl-tests style: largest size.")
@click.option(
    "-f", "--step-factor", type=int, default=None, help="nccl-tests style: each size this many times the last. [2]"
)
@click.option(
    "--blocks",
    type=int,
    default=None,
    metavar="N",
    help="Block lists shaped like KV caches: each transfer moves N blocks between slots of two pools, as puts, gets "
    "or tagged messages (--test put, get or bw), timed per transfer (p50, p99, p99.9) and against one contiguous "
    "message of the same bytes.",
)
@click.option(
    "--block-size",
    default=None,
    metavar="SIZES",
    help="With --blocks: the block sizes to sweep, as --sizes (4KiB:1MiB). [default: 4KiB:1MiB:x4]",
)
@click.option(
    "--layout",
    default="contiguous",
    metavar="contiguous|strided|random",
    help="With --blocks: where blocks sit in each pool: consecutive slots, every other slot, or slots drawn from a "
    "seeded table in a pool four times larger (or --pool).",
)
@click.option("--batch", type=int, default=1, help="With --blocks: transfers in flight per step.")
@click.option(
    "--posting",
    default="auto",
    metavar="auto|gpu|cpu",
    help="With --blocks, put or get of device memory: who posts the list. gpu: one kernel per transfer through "
    "UCX's device API (built once with nvcc); cpu: one UCX request per block; auto: the GPU where it can, else "
    "the CPU. Results name the path that ran, and why where auto fell back.",
)
@click.option(
    "--pool",
    default=None,
    metavar="SIZE",
    help="With --blocks: each end's pool in bytes. [default: what the layout needs; 4x that for random]",
)
@click.option(
    "--model",
    default=None,
    metavar="CONFIG",
    help="A KV-cache handoff as block lists: the descriptors one prefill rank posts to its decode peer for one "
    "prompt, from a model's KV shape: a known model (llama-3.1-8b, llama-3.1-70b, qwen2.5-7b, deepseek-v3) or a "
    "JSON file (a config.json too), then ,key=value overrides (tp, pp, dtype_bytes, tokens_per_block, layers, "
    "kv_heads, head_dim, mla, chunk_tokens). Sets --blocks and the block size; --layout places the blocks.",
)
@click.option(
    "--kv-layout",
    default="vllm",
    metavar="vllm|layer-contiguous|lmcache",
    help="With --model: a descriptor per layer x block x K/V (vLLM's NIXL connector), per block across layers, "
    "or per LMCache chunk of 256 tokens across layers.",
)
@click.option(
    "--prompt",
    type=int,
    default=None,
    metavar="TOKENS",
    help="With --model: the prompt's length in tokens, filling whole blocks. [default: 4096]",
)
@click.option(
    "--window",
    type=int,
    default=None,
    help="Messages in flight per link for bw/bibw and the patterns. [default: up to 64; at most 256 KiB "
    "in flight host to host (a core's cache), 8 MiB with one end in GPU memory, 512 MiB with both]",
)
@click.option(
    "--passes",
    type=int,
    default=None,
    help="Windows per step (round trips, for lat), streamed: each message is posted as soon as the one "
    "before it in its buffer completes, with one READY/ACK handshake a step. 1: one drained window a "
    "step. [default: about 64 MiB a step (4 GiB for GPU memory), at most 64 passes; lat: up to 200 "
    "round trips]",
)
@click.option(
    "--one-buffer",
    is_flag=True,
    help="bw/bibw: every message of a window from one send buffer into one receive buffer, as ucx_perftest "
    "and osu_bw do (their figures: a buffer that stays in cache). Needs --no-validate. [default: a buffer "
    "per message, the working set an application has]",
)
@click.option(
    "-n",
    "--iters",
    "iterations",
    type=int,
    default=None,
    help="Steps (windows or round trips) per sample. [default: calibrated so a sample lasts --sample-time]",
)
@click.option(
    "-w", "--warmup", type=int, default=None, help="Untimed steps before sampling. [default: by test and size]"
)
@click.option("--samples", type=int, default=5, help="Timed samples per size; the table shows their median.")
@click.option(
    "--sample-time",
    type=float,
    default=0.05,
    help="Target seconds per sample (wall clock, checks included), when --iters is not given.",
)
@click.option(
    "--timeout",
    type=float,
    default=None,
    help="Seconds one step may take before the job is stopped as stuck. [default: 60 s plus 1 s per 50 MB in flight]",
)
@click.option(
    "--validate/--no-validate",
    default=True,
    help="Check every byte of every message at the receiver (outside the timed region).",
)
@_writes(
    _Written(
        ("--output", "-o"),
        "output",
        "results",
        "Results file (JSON). [default: results/rdmabench-<test>-<modes>-<time>.json]",
    ),
    checked_here=False,
)
@click.option(
    "--max-pinned",
    default=None,
    metavar="SIZE",
    help="Most page-locked memory a rank may hold (e.g. 4GiB); pinned buffers are allocated once and reused across sizes.",
)
@click.option(
    "--chunk-size",
    "stage_chunk",
    default="4MiB",
    metavar="SIZE",
    help="staged mode: bytes per pinned staging buffer (one UCX message); messages are cut into chunks of this size.",
)
@click.option(
    "--stage-buffers",
    type=int,
    default=2,
    help="staged mode: pinned buffers per direction of a link (2 = double buffering, 1 = no overlap).",
)
@click.option(
    "--units",
    default="GB/s",
    metavar="GB/s|GiB/s|Gb/s",
    help="Bandwidth unit of the table (results files always hold GB/s = 1e9 bytes/s).",
)
@click.option(
    "--require-gdr",
    is_flag=True,
    help="Fail, instead of warning, when device memory is staged through host memory (and make UCX fail rather than fall back).",
)
@click.option(
    "--engine",
    default="auto",
    metavar="auto|native|python",
    help="Who runs the timed part of every step: a small C loop built on first use against UCXX's "
    "UCX (native), the Python loop, or native where a C compiler is found (auto). Staged and bounce "
    "modes always run in Python.",
)
@click.option(
    "--format",
    "output_format",
    default="table",
    metavar="table|json|csv",
    help="What rank 0 prints: a table as sizes complete, or at the end the results document (json) or one "
    "CSV row per link and size (csv, as `report --format csv`).",
)
@click.option(
    "--progress",
    default="auto",
    metavar="auto|links|rounds",
    help="For patterns: a table line per link, or one per round (its median and worst link); auto: per link "
    "up to 64 links in the whole schedule, per round beyond.",
)
@click.option(
    "--expect",
    multiple=True,
    metavar="KIND=SHARE|default",
    help="A pass/fail verdict at the end: every link at its largest size against this floor (see `rdmabench "
    "check`; 'default' also against its class in the run); exit 1 if one fails or a part is suspect, 3 if "
    "single slow figures are to measure again, 2 if no link could be judged (the results are kept). Only for tests whose figure is a bandwidth.",
)
def run(np_: int | None, **options: Any) -> None:
    """Measure the links of a pattern (by default one pair: ranks 0 and 1), per size.

    \b
    Locally:         rdmabench run                  (two ranks on this machine)
                     rdmabench run --np 2 --mode pinned --test bibw
    In a cluster:    mpirun -n 2 rdmabench run --mode device
                     srun -n 2 --gpus-per-task 1 rdmabench run --mode device
    """
    from .wire.mpi import launched_by_mpi

    config = _config(options)
    if launched_by_mpi():
        if np_ is not None:
            raise ConfigError("--np starts ranks itself; leave it out under mpirun or srun")
        from .job.run import run_job

        sys.exit(run_job(config))
    _run_local(np_ if np_ is not None else 2, config)


def _config(options: dict[str, Any]) -> RunConfig:
    mode = MemoryMode.parse(options.pop("mode"))
    src_mode = options.pop("src_mode")
    dst_mode = options.pop("dst_mode")
    ranged = _size_range(options.pop("min_size"), options.pop("max_size"), options.pop("step_factor"))
    if ranged is not None and options["sizes"] != DEFAULT_SIZES:
        raise ConfigError("give the sizes once: --sizes, or -b/-e/-f")
    handoff = _handoff(options)
    if handoff is not None:
        if ranged is not None or options["sizes"] != DEFAULT_SIZES:
            raise ConfigError("--model sets the block size: leave out --sizes and -b/-e/-f")
        sizes = [handoff.block_bytes]
        options.pop("sizes")
    else:
        sizes = _sizes(ranged or options.pop("sizes"), options.pop("block_size", None), options["blocks"])
    options.pop("sizes", None)
    options["pool"] = _size_option("--pool", options["pool"]) if options["pool"] else None
    max_pinned = options.pop("max_pinned")
    options["max_pinned"] = _size_option("--max-pinned", max_pinned) if max_pinned else None
    options["stage_chunk"] = _size_option("--chunk-size", options["stage_chunk"])
    options["expect"] = parse_expect(options.pop("expect"))
    options["nics"] = _rails(options["nics"])
    return RunConfig(
        src_mode=MemoryMode.parse(src_mode) if src_mode else mode,
        dst_mode=MemoryMode.parse(dst_mode) if dst_mode else mode,
        sizes=sizes,
        command_line=shlex.join(["rdmabench", *sys.argv[1:]]),
        **options,
    ).check()


def _handoff(options: dict[str, Any]) -> kvhandoff.Handoff | None:
    """--model: its handoff's descriptors become --blocks and the block size (given neither)."""
    spec = options["model"]
    if spec is None:
        return None
    if options["blocks"] is not None or options["block_size"] is not None:
        raise ConfigError("--model sets the blocks and their size: leave out --blocks and --block-size")
    found = kvhandoff.handoff(spec, options["kv_layout"], options["prompt"])
    options.pop("block_size")
    options["blocks"], options["model"] = found.count, found.model.to_dict()
    return found


def _rails(text: str | None) -> tuple[str, ...]:
    """--nics as a tuple of distinct device names."""
    if text is None:
        return ()
    rails = tuple(dict.fromkeys(_names(text)))
    if not rails or any(" " in name or "/" in name for name in rails):
        raise ConfigError(f"--nics takes device names separated by commas (mlx5_0:1,eth1), not {text!r}")
    return rails


def _size_range(low: str | None, high: str | None, factor: int | None) -> str | None:
    """nccl-tests' -b/-e/-f as a --sizes range (`low:high:xfactor`), or None when none was given."""
    if low is None and high is None and factor is None:
        return None
    if factor is not None and factor < 2:
        raise ConfigError(f"-f/--step-factor must be at least 2, not {factor}")
    low, high = low or high, high or low
    if low is None:
        raise ConfigError("-f/--step-factor needs -b/--min-size or -e/--max-size")
    return f"{low}:{high}:x{factor or 2}"


def _sizes(sizes: str, block_sizes: str | None, blocks: int | None) -> list[int]:
    """Message sizes, or with --blocks the block sizes (--block-size, else the default block sweep)."""
    if block_sizes is not None:
        if blocks is None:
            raise ConfigError("--block-size sizes the blocks of --blocks N: give --blocks as well")
        return parse_sizes(block_sizes)
    if blocks is not None and sizes == DEFAULT_SIZES:
        return parse_sizes(DEFAULT_BLOCK_SIZES)
    return parse_sizes(sizes)


def _size_option(option: str, text: str) -> int:
    try:
        return parse_size(text)
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def _run_local(np_: int, config: RunConfig) -> None:
    from .hardware.gpu import gpu_unavailable_reason, visible_gpu_count
    from .job.spawner import run_local

    if np_ < 2:
        raise ConfigError(f"--np must be at least 2 for a point-to-point test, not {np_}")
    if config.needs_gpu and visible_gpu_count() == 0:
        needing = "/".join(dict.fromkeys(m.value for m in config.modes if m.needs_gpu))
        raise ConfigError(f"{needing} memory needs a GPU: {gpu_unavailable_reason()}")
    if config.output is None:  # a free name, reserved for this run
        config.output = document.default_output_path(config.test, config.src_mode.value, config.dst_mode.value)
    else:
        document.check_writable(config.output, config.force)
        document.reserve(config.output)
    config.output = os.path.abspath(config.output)
    try:
        code = run_local(np_, config)
    finally:
        document.release(config.output)  # a run that ended before its first line leaves no stream
    sys.exit(code)


@main.command("copy", context_settings={"show_default": True})
@click.option("--sizes", default="1MiB,64MiB,256MiB", help="Copy sizes, as for run.")
@click.option("--directions", default="h2d,d2h,d2d", help="Comma-separated: h2d, d2h, d2d.")
@click.option(
    "--host-memory",
    default=",".join(HOST_KINDS),
    help="Comma-separated host memory kinds: pageable, pinned, write-combined, registered (cudaHostRegister), "
    "mapped (a kernel reads/writes pinned host memory in place: zero-copy), managed (cudaMallocManaged, migrated on access).",
)
@click.option("--gpus", default="all", help="GPU indices (0,1) or all; each measured on its own.")
@click.option(
    "--together/--no-together", default=True, help="Also time every GPU pulling from pinned host memory at once."
)
@click.option("--overlap/--no-overlap", default=True, help="Also measure how much of a copy hides behind a kernel.")
@click.option("--samples", default=5, help="Timed samples per point (each about 20 ms of copies).")
@_writes(
    _Written(("--output", "-o"), "output", "results", "Results file. [default: results/rdmabench-copy-<time>.json]")
)
@click.option(
    "--framework",
    default="cupy",
    metavar="cupy|torch",
    help="torch: PyTorch's own path (pageable/pinned tensors with and without non_blocking, pin_memory() per "
    "call, a side-stream copy beside matmuls, DataLoader pin_memory), each beside the raw CuPy copy of the run.",
)
def copy_command(
    sizes: str,
    directions: str,
    host_memory: str,
    gpus: str,
    together: bool,
    overlap: bool,
    samples: int,
    output: str | None,
    force: bool,
    framework: str,
) -> None:
    """Host-to-device, device-to-host and device-to-device copy bandwidth per GPU, from pageable,
    pinned, write-combined and registered host memory (CUDA events, medians, data checked), beside a
    plain CuPy loop; the cost of pinning; and copy/compute overlap. GB/s = 1e9 bytes/s."""
    from .bench import copy as copy_module

    if framework != "cupy":
        _torch_copy(framework, sizes, gpus, samples, output, force)
        return
    size_list = parse_sizes(sizes)
    direction_list, kinds = _names(directions), _names(host_memory)
    for d in direction_list:
        if d not in copy_module.DIRECTIONS:
            raise ConfigError(f"unknown direction {d!r}: choose from {', '.join(copy_module.DIRECTIONS)}")
    for k in kinds:
        if k not in copy_module.HOST_KINDS:
            raise ConfigError(f"unknown host memory {k!r}: choose from {', '.join(copy_module.HOST_KINDS)}")
    if not 1 <= samples <= 1000:
        raise ConfigError(f"--samples must be between 1 and 1000, not {samples}")
    cupy = copy_module.require_gpu()
    from .hardware.gpu import visible_gpu_count

    count = visible_gpu_count()
    gpu_list = list(range(count)) if gpus == "all" else [int(g) for g in gpus.split(",") if g.strip().isdigit()]
    if not gpu_list or any(g >= count for g in gpu_list):
        raise ConfigError(f"--gpus {gpus!r}: this machine has GPUs 0..{count - 1}")
    if output is None:
        output = document.default_output_path("copy", "host", "device", reserve_it=False)
    document.check_writable(output, force)
    doc = copy_module.run(cupy, size_list, direction_list, kinds, gpu_list, together, overlap, samples, _say)
    doc["metadata"]["command_line"] = shlex.join(["rdmabench", *sys.argv[1:]])
    document.write(output, doc)
    click.echo(f"# results written to {output}")


def _torch_copy(framework: str, sizes: str, gpus: str, samples: int, output: str | None, force: bool) -> None:
    from .bench import torchcopy

    if framework != "torch":
        raise ConfigError(f"unknown --framework {framework!r}: choose cupy or torch")
    size_list = parse_sizes(sizes)
    if not 1 <= samples <= 1000:
        raise ConfigError(f"--samples must be between 1 and 1000, not {samples}")
    gpu = 0 if gpus == "all" else _count(gpus.split(",")[0].strip(), "--gpus")
    torchcopy.require_cuda(torchcopy.import_torch())
    if output is None:
        output = document.default_output_path("copy-torch", "host", "device", reserve_it=False)
    document.check_writable(output, force)
    doc = torchcopy.run(size_list, samples, gpu, _say)
    doc["metadata"]["command_line"] = shlex.join(["rdmabench", *sys.argv[1:]])
    document.write(output, doc)
    click.echo(f"# results written to {output}")


@main.command("storage", context_settings={"show_default": True})
@click.argument("file", type=click.Path())
@click.option(
    "--size",
    default=None,
    metavar="SIZE",
    help="Create FILE with this many bytes of rdmabench's pattern first (removed at the end unless --keep). "
    "Without it FILE must exist (made by an earlier --keep run, or any file with --no-validate).",
)
@click.option("--test", "tests", default="read", help="Comma-separated: read (storage-read), write (storage-write).")
@click.option(
    "--paths",
    default=None,
    help="Comma-separated: pageable (read() + copy: the bounce), pinned (O_DIRECT into pinned buffers, pipelined "
    "copies), kvikio (KvikIO CuFile: GPUDirect Storage or its POSIX mode). [default: every one this machine can run]",
)
@click.option(
    "--memory", default=None, metavar="device|host", help="Into GPU or host memory. [default: device with a GPU]"
)
@click.option(
    "--sizes",
    default=None,
    help="Request sizes, as for run (O_DIRECT: multiples of 4 KiB). [default: 1MiB,16MiB, those the file holds]",
)
@click.option("--threads", default="1", help="Comma-separated: requests in flight (one worker thread each).")
@click.option("--buffers", default=2, help="Pinned buffers per worker of the pinned path (2: double buffering).")
@click.option("--samples", default=3, help="Timed passes over the whole file per point.")
@click.option("--gpu", default=0, help="The GPU to read into.")
@click.option("--validate/--no-validate", default=True, help="Check every byte that landed (untimed).")
@click.option("--keep", is_flag=True, help="Keep the file --size created.")
@_writes(
    _Written(("--output", "-o"), "output", "results", "Results file. [default: results/rdmabench-storage-<time>.json]")
)
def storage_command(file: str, size: str | None, tests: str, paths: str | None, **options: Any) -> None:
    """Read a file into GPU (or host) memory, and write memory to a file, by each path side by side:
    GB/s (1e9 B/s) over the whole file, per-request latency, CPU seconds per GB, and the limits (the
    device's own O_DIRECT rate, measured; the GPU's PCIe link). Every byte that landed is checked."""
    from .bench import storage as storage_module

    output, force = options.pop("output"), options.pop("force")
    try:
        config = storage_module.StorageConfig(
            file=file,
            create_size=parse_sizes(size)[0] if size else None,
            tests=_names(tests),
            paths=_names(paths) if paths else None,
            sizes=parse_sizes(sizes) if (sizes := options.pop("sizes")) else None,
            threads=[_count(t, "--threads") for t in _names(options.pop("threads"))],
            **options,
        )
        storage_module.check(config)
        if output is None:
            output = document.default_output_path("storage", "file", config.memory or "memory", reserve_it=False)
        document.check_writable(output, force)
        doc = storage_module.run(config, _say)
        doc["metadata"]["command_line"] = shlex.join(["rdmabench", *sys.argv[1:]])
        document.write(output, doc)
        click.echo(f"# results written to {output}")
    except OSError as exc:  # a file that vanished or cannot be read mid-run: one line, not a traceback
        _fail(ResourceError(f"{exc.filename or file}: {exc.strerror or exc}"))


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _count(text: str, option: str) -> int:
    if not text.isdigit():
        raise ConfigError(f"{option} takes whole numbers, not {text!r}")
    return int(text)


@main.command(context_settings={"show_default": True})
@click.option(
    "--mode", default="host", metavar="host|device", help="Memory on both sides: host, or device (GPUs 0 and 1)."
)
@click.option(
    "--against",
    default="perftest",
    metavar="perftest|nixl",
    help="The anchor: ucx_perftest (the C anchor), or NIXL's UCX backend moving the same block lists "
    "(pip install --no-deps nixl-cu13).",
)
@click.option(
    "--sizes",
    default=None,
    help="Message sizes, as for run; with --against nixl the block sizes. [default: 8,1MiB,64MiB; with --against "
    "nixl 4KiB,64KiB,1MiB]",
)
@click.option(
    "--tests",
    default=None,
    help="Comma-separated: bw (vs tag_bw), lat (tag_lat), put (ucp_put_bw), get (ucp_get), put-lat (ucp_put_lat); "
    "with --mode device also bibw (vs both copy engines copying GPU0 <-> GPU1 at once) and incast (a rank a GPU, "
    "all to GPU 0, vs every GPU copying into GPU 0 at once). With --against nixl: put (WRITE), get (READ). "
    "[default: bw,lat; with --against nixl put]",
)
@click.option(
    "--blocks",
    "counts",
    default=None,
    metavar="N[,N...]",
    help="With --against nixl: blocks per transfer, each count a list of its own (1 to 1048576). [default: 1024]",
)
@click.option(
    "--layout",
    "layouts",
    default=None,
    metavar="LAYOUT[,LAYOUT...]",
    help="With --against nixl: contiguous, strided, random (as run's --layout). [default: random]",
)
@click.option(
    "--model",
    default=None,
    metavar="CONFIG",
    help="With --against nixl: a model's KV-cache handoff as the list (as run's --model), instead of --blocks "
    "and --sizes.",
)
@click.option(
    "--nixl-threads",
    type=int,
    default=0,
    metavar="N",
    help="With --against nixl: the threads of NIXL's UCX backend (num_threads; vLLM's connector passes 4); 0: "
    "NIXL's default.",
)
@click.option("--kv-layout", default="vllm", metavar="vllm|layer-contiguous|lmcache", help="With --model, as run's.")
@click.option("--prompt", type=int, default=None, metavar="TOKENS", help="With --model, as run's. [default: 4096]")
@click.option(
    "--posting",
    default="auto",
    metavar="auto|gpu|cpu",
    help="With --against nixl --mode device: who posts rdmabench's lists, as run's --posting (cpu: a request per "
    "block, as NIXL posts). [default: auto]",
)
@click.option(
    "--repeat",
    default=1,
    type=click.IntRange(min=1),
    help="Run the whole comparison this many times; print each figure's median, each ratio's spread and the "
    "steady rounds' medians.",
)
@_writes(_Written(("--output", "-o"), "output", "the anchor rows", "Also write the rows as JSON here."))
def anchor(
    mode: str, against: str, sizes: str | None, tests: str | None, repeat: int, output: str | None, force: bool,
    **nixl_options: Any,
) -> None:  # fmt: skip
    """Compare rdmabench with an anchor on this machine, side by side: ucx_perftest, or NIXL.

    Runs ucx_perftest and `rdmabench run --np 2` on the same memory type and sizes, then prints both
    figures and their ratio, with and without payload validation, and the extra time per message.
    ucx_perftest runs just before and just after rdmabench; the anchor is their mean and `drift` how
    far apart they were (over 10%: the machine changed speed, the row's ratios are unreliable). On a
    noisy machine use --repeat 5: each round's ratios are taken side by side, then their medians, over
    all rounds and over the steady ones.

    With --against nixl: NIXL's UCX backend (two processes of its own) and rdmabench move the same
    block lists (--blocks x --layout x --sizes, or a --model's handoff), NIXL just before and just after
    rdmabench, both with validation off (rdmabench also with it on): per-transfer GB/s, p50/p99/p99.9,
    posting share, descriptors a second, CPU s/GB, against one contiguous message, cold costs, and the
    UCX protocol each used.
    """
    import json

    from .bench import anchor as anchor_module

    progress = lambda line: click.echo(visible_lines(line), err=True)  # noqa: E731
    if against == "nixl":
        rows, text, written = _nixl_anchor(mode, sizes, tests, repeat, nixl_options, progress)
    else:
        _perftest_only(against, nixl_options)
        rows = anchor_module.compare(
            mode, parse_sizes(sizes or "8,1MiB,64MiB"), _names(tests or "bw,lat"), repeat, progress=progress
        )
        text = anchor_module.format_rows(rows)
        written = {"schema": {"name": "rdmabench-anchor", "version": 1}, "rows": rows}
    if output is not None:  # first: minutes of measurements must not hang on the table printing
        try:
            userfiles.write_text(output, json.dumps(written, indent=1))
        except OSError as exc:  # a disk that filled meanwhile: the rows still reach the terminal
            _say(text)
            _fail(ResultsWriteError(f"cannot write {output}: {exc.strerror or exc}; the rows are printed above"))
    _say(text)
    if rows and rows[0].get("incomplete"):
        _fail(LaunchError(rows[0]["incomplete"]))


_NIXL_ONLY = {
    "counts": None, "layouts": None, "model": None, "kv_layout": "vllm", "prompt": None, "nixl_threads": 0,
    "posting": "auto",
}  # fmt: skip
_OPTION_NAMES = {"counts": "--blocks", "layouts": "--layout"}  # the others: their parameter's name


def _perftest_only(against: str, nixl_options: dict[str, Any]) -> None:
    """The ucx_perftest anchor takes none of the NIXL anchor's options."""
    if against != "perftest":
        raise ConfigError(f"unknown anchor {against!r}: choose perftest or nixl")
    for name, default in _NIXL_ONLY.items():
        if nixl_options[name] != default:
            option = _OPTION_NAMES.get(name, f"--{name.replace('_', '-')}")
            raise ConfigError(f"{option} is an option of the NIXL anchor: add --against nixl")


def _nixl_anchor(
    mode: str, sizes: str | None, tests: str | None, repeat: int, options: dict[str, Any], progress: Any
) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    """`anchor --against nixl`: the plan from the options, the rows, their table and their document."""
    from .bench import nixl

    handoff = None
    if options["model"] is not None:
        if options["counts"] is not None or sizes is not None:
            raise ConfigError("--model sets the blocks and their size: leave out --blocks and --sizes")
        handoff = kvhandoff.handoff(options["model"], options["kv_layout"], options["prompt"])
    elif (options["kv_layout"], options["prompt"]) != ("vllm", None):
        raise ConfigError("--kv-layout and --prompt shape a model's handoff: give --model as well")
    plan = nixl.NixlPlan(
        sizes=tuple(parse_sizes(sizes or "4KiB,64KiB,1MiB")),
        counts=tuple(_count(part, "--blocks") for part in _names(options["counts"] or "1024")),
        layouts=tuple(_names(options["layouts"] or "random")),
        tests=tuple(_names(tests or "put")),
        mode=mode,
        handoff=handoff,
        threads=options["nixl_threads"],
        posting=options["posting"],
    )
    rows = nixl.compare(plan, repeat, progress=progress)
    return rows, nixl.format_rows(rows), nixl.document(rows)


@main.command(context_settings={"show_default": True})
@click.option("--format", "output_format", default="table", metavar="table|json", help="A table for people, or JSON.")
@click.option(
    "--path",
    default=".",
    type=click.Path(exists=True),
    help="Where `rdmabench storage` would read: its file system, O_DIRECT and GPUDirect Storage are checked.",
)
def doctor(output_format: str, path: str) -> None:
    """Check this machine for what helps or hurts transfers: GPUs and their links, GPUDirect RDMA,
    gdrcopy, the memlock limit, UCX and its transports, UCX_* settings, MPI, NUMA placement, CPU
    governor, transparent huge pages, and the storage under --path (file system, O_DIRECT, GPUDirect
    Storage). Each check has a verdict and advice.

    Exit status: 0 when nothing blocks a device-direct run (or there is no GPU to run one on), 1 when
    a check fails, 2 for bad options.
    """
    import json

    from .hardware import doctor as doctor_module

    if output_format not in ("table", "json"):
        _fail(ConfigError(f"unknown format {output_format!r}: choose table or json"))
    findings = doctor_module.run_checks(path)
    if output_format == "json":
        payload = {
            "device_direct": doctor_module.device_direct(findings),
            "findings": [f.to_dict() for f in findings],
        }
        click.echo(json.dumps(payload, indent=1))
    else:
        click.echo(doctor_module.format_table(findings))
    sys.exit(1 if doctor_module.device_direct(findings) == "blocked" else 0)


def _filter_options(command: Any) -> Any:
    options = [
        click.option("--test", "tests", multiple=True, help="Only this test (repeatable)."),
        click.option(
            "--mode", "modes", multiple=True, help="Only entries with this memory mode at either end (repeatable)."
        ),
        click.option("--size", "sizes", default=None, help="Only these sizes (same syntax as run --sizes)."),
        click.option("--host", "hosts", multiple=True, help="Only links with an end on this host (repeatable)."),
        click.option(
            "--link-class",
            "link_classes",
            multiple=True,
            metavar="same GPU|intra-node|inter-node",
            help="Only this class of link (repeatable).",
        ),
        click.option(
            "--since",
            default=None,
            metavar="WHEN",
            help="Only runs made at or after WHEN: YYYY-MM-DD (from the start of that UTC day) or "
            "YYYY-MM-DDTHH:MM[:SS] with Z or an offset (2026-11-25T08:00:00+01:00); nothing else.",
        ),
        click.option(
            "--until",
            default=None,
            metavar="WHEN",
            help="Only runs made at or before WHEN, as --since (a day: through its end, UTC).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _filters(
    tests: tuple[str, ...],
    modes: tuple[str, ...],
    sizes: str | None,
    hosts: tuple[str, ...],
    link_classes: tuple[str, ...],
    since: str | None,
    until: str | None,
) -> Any:
    from .results import dates
    from .results.rows import LINK_CLASSES, Filters

    for cls in link_classes:
        if cls not in LINK_CLASSES:
            raise ConfigError(f"unknown link class {cls!r}: choose one of {', '.join(LINK_CLASSES)}")
    first, last = dates.parse_bounds(since, until)
    return Filters(tests, modes, tuple(parse_sizes(sizes)) if sizes else (), hosts, link_classes, first, last)


def _write_or_print(chunks: Iterable[str], output: str | None) -> None:
    """A report's pieces, written as they come to `output` (whole or not at all) or standard output,
    which ends with a line break."""
    if output is None:
        last = ""
        for chunk in chunks:
            click.echo(chunk, nl=False)
            last = chunk or last
        if not last.endswith("\n"):
            click.echo("")
        return
    try:
        userfiles.write_chunks(output, chunks)
    except OSError as exc:
        raise ResultsWriteError(f"cannot write the report to {output}: {exc.strerror or exc}") from None
    click.echo(f"# report written to {output}", err=True)


def _load(paths: tuple[str, ...], warn_duplicates: bool = True) -> Any:
    from .results.loading import load_all

    loaded = load_all(paths)
    for problem in loaded.problems:
        click.echo(f"rdmabench: warning: skipped {visible(problem)}", err=True)
    if warn_duplicates:  # compare lists them in its output
        for duplicate in loaded.duplicates:
            click.echo(f"rdmabench: warning: ignored {visible(str(duplicate))}", err=True)
    if not loaded.documents:
        raise ConfigError("no usable results files among " + ", ".join(paths))
    return loaded


def _aggregate(documents: list[tuple[str, Any]], chosen: Any) -> Any:
    """The rows of loaded documents; a warning per file whose records repeat a link (counted once)."""
    from .results.rows import aggregate

    notes: list[str] = []
    rows = aggregate(documents, chosen, notes)
    for note in notes:
        click.echo(f"rdmabench: warning: {visible(note)}", err=True)
    return rows


@main.command(context_settings={"show_default": True})
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "output_format",
    default="table",
    metavar="table|markdown|csv|html|json",
    help="Output format; html is one self-contained page with plots.",
)
@_writes(_Written(("--output", "-o"), "output", "the report", "Write here instead of standard output."))
@click.option("--by", default="none", metavar="none|host|link-class|mode|size|date", help="Group the rows.")
@click.option("--outlier-fraction", default=0.2, help="List links this much worse than the median of their class.")
@click.option(
    "--expect",
    multiple=True,
    metavar="KIND=SHARE|default",
    help="Also judge every link at its largest size against a floor (see `rdmabench check`; 'default' also "
    "against its class in the run); exit 1 if one fails or a part is suspect, 3 if single slow figures are to "
    "measure again, 2 if no link could be judged.",
)
@_filter_options
def report(
    paths: tuple[str, ...],
    output_format: str,
    output: str | None,
    force: bool,
    by: str,
    outlier_fraction: float,
    expect: tuple[str, ...],
    **filters: Any,
) -> None:
    """Aggregate results files (or directories of them): per link and per (test, modes, size), the
    median over runs, the spread and the count; the suspect parts first (but in CSV), then outliers."""

    from .results import formats
    from .results import verdict as verdict_module
    from .results.attribution import attribute
    from .results.outcome import conclude, no_verdict

    try:
        if by not in formats.GROUPINGS:  # bad options are reported before any file is read
            raise ConfigError(f"unknown grouping {by!r}: choose one of {', '.join(formats.GROUPINGS)}")
        if output_format not in formats.FORMATS:
            raise ConfigError(f"unknown format {output_format!r}: choose table, markdown, csv, html or json")
        if not 0 < outlier_fraction < 1:
            raise ConfigError(f"--outlier-fraction must be between 0 and 1, not {outlier_fraction}")
        floors = verdict_module.parse_expect(expect)
        chosen = _filters(**filters)
        loaded = _load(paths)
        rows = _aggregate(loaded.documents, chosen)
        if not rows:
            raise ConfigError("no results match the filters")
        skipped = [*loaded.problems, *map(str, loaded.duplicates)]  # files left out, each with why
        sources = [path for path, _ in loaded.documents]
        found = attribute(rows) if output_format != "csv" or floors else None  # once
        _write_or_print(
            formats.render_chunks(rows, output_format, by, outlier_fraction, skipped, sources, found), output
        )
        judged = conclude(rows, floors, found=found) if floors else None  # check's verdict, and exit status
        if judged is not None and judged.outcome == "INCONCLUSIVE":
            raise no_verdict(judged)
    except RdmabenchError as exc:
        _fail(exc)
    if judged is not None:
        click.echo(judged.verdict_text(), err=True)
        sys.exit(judged.exit_code)


@main.command(context_settings={"show_default": True})
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--expect",
    multiple=True,
    metavar="KIND=SHARE|default",
    help="A floor as a share of the physical limit, per limit kind (NVLink, PCIe, NIC, 'host memory copy') "
    "or link class ('same GPU', intra-node, inter-node, all); repeatable. 'default': "
    + ", ".join(f"{k}={v}" for k, v in DEFAULT_FLOORS.items())
    + ", and each link against its class in the run: below the class median less 3 or more robust spreads "
    "(and at least 5% below it), or one of a suspect part's slow links, it fails.",
)
@click.option("--baseline", default=None, help="Results file or directory each link must be no worse than.")
@click.option("--tolerance", default=0.1, help="How much worse than the baseline a link may be.")
@_writes(
    _Written(("--json",), "json_path", "the verdict", "Write the verdict and the suspects as JSON here."),
    _Written(("--junit",), "junit_path", "the verdict", "Write JUnit XML here (one case per link)."),
    _Written(
        ("--drain",),
        "drain_path",
        "the drain list",
        "Write a Slurm drain list here: the hosts of the suspect parts, as a hostlist and one `scontrol "
        "update NodeName=... State=DRAIN` line each (never run: review, then run them yourself).",
    ),
)
@_filter_options
def check(
    paths: tuple[str, ...],
    expect: tuple[str, ...],
    baseline: str | None,
    tolerance: float,
    json_path: str | None,
    junit_path: str | None,
    drain_path: str | None,
    force: bool,
    **filters: Any,
) -> None:
    """Pass or fail: names the suspect parts first (a GPU, NIC, host, pair of hosts or single link
    that explains the slow links, with its evidence), then judges every link at its largest size
    against a floor (a share of its physical limit; with `default` also its class in the run) and/or
    a baseline run. Exit status 1 when a link fails or a part is suspect, 0 when all pass, 3
    (REMEASURE) when nothing failed but single slow figures, never measured again, are to measure
    again (the command is printed), 2 for bad input or when there is no verdict: nothing matched, no
    floor applied to any link, or no link was in the baseline, and nothing is suspect (never a pass
    on nothing)."""
    from .results import verdict as verdict_module
    from .results.attribution import attribute
    from .results.drain import write_drain_list
    from .results.hostlist import compress
    from .results.outcome import conclude, no_verdict

    try:
        floors = verdict_module.parse_expect(expect)
        if not floors and baseline is None:
            raise ConfigError("give --expect (a floor per limit kind or link class) or --baseline, or both")
        if not 0 <= tolerance < 1:
            raise ConfigError(f"--tolerance must be at least 0 and below 1, not {tolerance}")
        chosen = _filters(**filters)
        rows = _aggregate(_load(paths).documents, chosen)
        base = _aggregate(_load((baseline,)).documents, chosen) if baseline is not None else None
        if not rows:
            raise ConfigError("no results match the filters")
        found = attribute(rows)
        checked = conclude(rows, floors, base, tolerance, found)
        if checked.outcome == "INCONCLUSIVE":
            click.echo("\n".join(checked.suspect_lines()))
            raise no_verdict(checked)
        if json_path is not None:
            userfiles.write_chunks(json_path, checked.json_chunks())  # a million passed links, a line each
        if junit_path is not None:
            userfiles.write_text(junit_path, checked.junit())
        drained = write_drain_list(drain_path, found, force=force) if drain_path is not None else None
    except RdmabenchError as exc:
        _fail(exc)
    except OSError as exc:
        _fail(ConfigError(f"cannot write the verdict: {exc}"))
    click.echo(checked.text())
    if drained is not None and drain_path is not None:
        hosts = compress(d.host for d in drained) if drained else "no host"
        click.echo(f"drain list: {visible(drain_path)} ({hosts})")
    sys.exit(checked.exit_code)


@main.command(context_settings={"show_default": True})
@click.argument("base", nargs=1)
@click.argument("new", nargs=1)
@click.option(
    "--threshold", default=0.05, help="A change for the worse beyond this fraction, if significant, is a regression."
)
@click.option("--format", "output_format", default="table", metavar="table|json", help="Output format.")
@_filter_options
def compare(base: str, new: str, threshold: float, output_format: str, **filters: Any) -> None:
    """Compare two results files (or directories): per link and size, the change of the median and
    whether it is beyond run-to-run noise: a Mann-Whitney U test on the runs' figures (4 runs or
    more on each side; fewer are shown untested), corrected for the number of links tested
    (Benjamini-Hochberg q-values). A run counts once: files of the same run (the same run id or the
    same records) are named and ignored. Exit status 1 when a significant regression is found, 0 when
    none is, 2 for bad input or when no pair could be tested (no verdict), for use in a cluster's CI;
    for a gate on single runs use `rdmabench check --baseline`."""
    import json

    from .results import compare as compare_module

    if not 0 < threshold < 1:
        raise ConfigError(f"--threshold must be between 0 and 1, not {threshold}")
    if output_format not in ("table", "json"):
        raise ConfigError(f"unknown format {output_format!r}: choose table or json")
    chosen = _filters(**filters)
    base_loaded, new_loaded = _load((base,), warn_duplicates=False), _load((new,), warn_duplicates=False)
    base_rows = _aggregate(base_loaded.documents, chosen)
    new_rows = _aggregate(new_loaded.documents, chosen)
    changes, unmatched = compare_module.compare(base_rows, new_rows, threshold)
    if not changes:
        differ = next((line.split("; ", 1)[1] for line in unmatched if "other settings" in line), "")
        raise ConfigError("BASE and NEW have no link and size in common" + (f" ({differ})" if differ else ""))
    duplicates = [f"{side} {d}" for side, d in (("BASE", base_loaded), ("NEW", new_loaded)) for d in d.duplicates]
    if output_format == "json":
        # One change per line: an indented dump of a million changes took minutes.
        rows = ",\n".join(json.dumps(c.to_dict(), separators=(",", ":")) for c in changes)
        click.echo(
            f'{{"changes": [\n{rows}\n],\n"unmatched": {json.dumps(unmatched, indent=1)},\n'
            f'"duplicates": {json.dumps(duplicates, indent=1)}}}'
        )
    else:
        click.echo(compare_module.format_changes(changes, unmatched, threshold, duplicates))
    code = compare_module.comparison_exit(changes)
    sys.exit(code)


if __name__ == "__main__":
    main()
