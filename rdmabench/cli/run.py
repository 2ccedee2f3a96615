"""`rdmabench run`: its option groups, and the run started here (--np) or joined (under mpirun/srun)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..errors import ConfigError
from ..job.config import ENGINES, OUTPUT_FORMATS, PROGRESS, UNITS, RunConfig
from ..job.schedule import LINK_CLASSES, PATTERNS, pattern_help
from ..results.files import document
from .blocklists import block_options, files_read
from .group import SETTINGS, Written, command_line, main, writes
from .options import (
    RAILS,
    beside_option,
    choices,
    expect_option,
    format_option,
    group,
    memory_options,
    model_budget_option,
    renamed,
    size_options,
    test_help,
    test_names,
)

# Which links, of which test.
link_options = group(
    click.option("--test", default="bw", metavar=test_names(), help=test_help()),
    click.option(
        "--pattern",
        default="pair",
        metavar=choices(PATTERNS),
        help=pattern_help(),
    ),
    click.option(
        "--remeasure-below",
        type=float,
        default=0.8,
        metavar="SHARE",
        help="For screen: re-measure alone every link below this share of its link class's median (0: none).",
    ),
    renamed(
        "--link-class",
        "--links",
        "link_class",
        default=LINK_CLASSES[0],
        metavar=choices(LINK_CLASSES),
        help="For all-pairs: only links within a node, or only between nodes.",
    ),
    click.option(
        "--concurrent",
        is_flag=True,
        help="For all-pairs: measure disjoint pairs at once, in N-1 rounds per direction, instead of one link at a time.",
    ),
    click.option("--root", default=0, help="The rank incast sends to and fan-out sends from."),
    beside_option(
        "Device memory, one link at a time: a model's compute on each rank's GPU beside the sampled steps, "
        "every sample timed as a pair (the link alone, the load alone, both at once); entries carry the link "
        "alone and beside, each GPU's load alone and beside, and the load's slowdown. gemm[:M],carveout=N plans "
        "the GEMM for the GPU's SMs less N and runs the posting kernel on a grid for those N (carveout=all: 0, 4, "
        "8 and 16, each its own entries). Loads:"
    ),
    click.option(
        "--nics",
        default=None,
        type=RAILS,
        metavar="DEV[,DEV...]",
        help="The rails to send through: RDMA ports (mlx5_0:1) or network interfaces (eth1). Each rank takes "
        "the one nearest its GPU, ties by local rank (rank i of a host takes rail i), and UCX is told "
        "(UCX_NET_DEVICES). [default: the active RDMA ports; without them UCX chooses]",
    ),
)

# How each size is measured: the window, the steps, the samples, the checks and who times them.
step_options = group(
    click.option(
        "--window",
        type=int,
        default=None,
        help="Messages in flight per link for bw/bibw and the patterns. [default: up to 64; at most 256 KiB "
        "in flight host to host (a core's cache), 8 MiB with one end in GPU memory, 512 MiB with both]",
    ),
    click.option(
        "--passes",
        type=int,
        default=None,
        help="Windows per step (round trips, for lat), streamed: each message is posted as soon as the one "
        "before it in its buffer completes, with one READY/ACK handshake a step. 1: one drained window a "
        "step. [default: about 64 MiB a step (4 GiB for GPU memory), at most 64 passes; lat: up to 200 "
        "round trips]",
    ),
    click.option(
        "--one-buffer",
        is_flag=True,
        help="bw/bibw: every message of a window from one send buffer into one receive buffer, as ucx_perftest "
        "and osu_bw do (their figures: a buffer that stays in cache). Needs --no-validate. [default: a buffer "
        "per message, the working set an application has]",
    ),
    click.option(
        "-n",
        "--iters",
        "iterations",
        type=int,
        default=None,
        help="Steps (windows or round trips) per sample. [default: calibrated so a sample lasts --sample-time]",
    ),
    click.option(
        "-w", "--warmup", type=int, default=None, help="Untimed steps before sampling. [default: by test and size]"
    ),
    click.option("--samples", type=int, default=5, help="Timed samples per size; the table shows their median."),
    click.option(
        "--sample-time",
        type=float,
        default=0.05,
        help="Target seconds per sample (wall clock, checks included), when --iters is not given.",
    ),
    click.option(
        "--timeout",
        type=float,
        default=None,
        help="Seconds one step may take before the job is stopped as stuck. [default: 60 s plus 1 s per 50 MB in flight]",
    ),
    click.option(
        "--validate/--no-validate",
        default=True,
        help="Check every byte of every message at the receiver (outside the timed region).",
    ),
    click.option(
        "--remeasure-host-copy",
        is_flag=True,
        help="Measure each host's memory copy (the limit of host-to-host links) again, and keep the new figure, "
        "instead of taking the one measured earlier on this boot (kept in the user's cache directory).",
    ),
    click.option(
        "--engine",
        default=ENGINES[0],
        metavar=choices(ENGINES),
        help="Who runs the timed part of every step: a small C loop built on first use against UCXX's "
        "UCX (native), the Python loop, or native where a C compiler is found (auto). Staged and bounce "
        "modes always run in Python.",
    ),
)

# What rank 0 writes and prints, and the verdict it ends with.
output_options = group(
    writes(
        Written(
            ("--output", "-o"),
            "output",
            "results",
            "Results file (JSON). [default: results/rdmabench-<test>-<modes>-<time>.json]",
        ),
        checked_here=False,
        reads=files_read,  # a block table or a model's file: never replaced by the results
    ),
    click.option(
        "--units",
        default=UNITS[0],
        metavar=choices(UNITS),
        help="Bandwidth unit of the table (results files always hold GB/s = 1e9 bytes/s).",
    ),
    format_option(
        OUTPUT_FORMATS,
        "What rank 0 prints: a table as sizes complete, or at the end the results document (json) or one "
        "CSV row per link and size (csv, as `report --format csv`).",
    ),
    click.option(
        "--progress",
        default=PROGRESS[0],
        metavar=choices(PROGRESS),
        help="For patterns: a table line per link, or one per round (its median and worst link); auto: per link "
        "up to 64 links in the whole schedule, per round beyond.",
    ),
    expect_option(
        "A pass/fail verdict at the end: every link at its largest size against this floor (see `rdmabench "
        "check`; 'default' also against its class in the run); exit 1 if one fails or a part is suspect, 3 if "
        "single slow figures are to measure again, 2 if no link could be judged (the results are kept). Only for "
        "tests whose figure is a bandwidth.",
    ),
    model_budget_option(", printed at the end when several paths ran or a model beside them"),
)


@main.command(context_settings=SETTINGS)
@click.option(
    "--np",
    "np_",
    type=int,
    default=None,
    help="Start this many local ranks with mpiexec. [default: 2 when not launched by mpirun/srun]",
)
@link_options
@memory_options
@size_options
@block_options
@click.option(
    "--pace",
    default=None,
    metavar="SMSxCTASxTHREADS[,...]",
    help="With --test swap-out or swap-in and --posting kernel or all: the offload kernel's pace, a list each "
    "(SMs' worth of CTAs, CTAs an SM, threads a CTA; a warp a block, 128 B of loads a thread in flight). "
    "Sweep it: past a knee a faster pace costs the model more than it gains. [default: 2x1x128 out, 8x1x128 in]",
)
@step_options
@output_options
def run(np_: int | None, **options: Any) -> None:
    """Measure the links of a pattern (by default one pair: ranks 0 and 1), per size.

    \b
    Locally:         rdmabench run                  (two ranks on this machine)
                     rdmabench run --np 2 --mode pinned --test bibw
    In a cluster:    mpirun -n 2 rdmabench run --mode device
                     srun -n 2 --gpus-per-task 1 rdmabench run --mode device
    """
    from ..wire.mpi import launched_by_mpi

    config = RunConfig.from_options(options, command_line=command_line())
    if launched_by_mpi():
        if np_ is not None:
            raise ConfigError("--np starts ranks itself; leave it out under mpirun or srun")
        from ..job.run import run_job

        sys.exit(run_job(config))
    _run_local(np_ if np_ is not None else 2, config)


def _run_local(np_: int, config: RunConfig) -> None:
    from ..hardware.gpu import gpu_unavailable_reason, visible_gpu_count
    from ..job.spawner import run_local

    if np_ < (1 if config.pattern.own else 2):  # --pattern each: every rank with itself, one rank a job
        raise ConfigError(f"--np must be at least 2 for a point-to-point test, not {np_}")
    if config.needs_gpu and visible_gpu_count() == 0:
        needing = "/".join(dict.fromkeys(m.value for m in config.modes if m.needs_gpu))
        raise ConfigError(f"{needing} memory needs a GPU: {gpu_unavailable_reason()}")
    try:  # a signal between the reservation and the run gives the name back too
        if config.out.output is None:  # a free name, reserved for this run
            config.out.output = document.default_output_path(
                config.what.test, config.memory.src_mode.value, config.memory.dst_mode.value
            )
        else:
            document.check_writable(config.out.output, config.out.force)
            document.reserve(config.out.output)
        config.out.output = os.path.abspath(config.out.output)
        code = run_local(np_, config)
    finally:
        if config.out.output is not None and document.reserved_here(config.out.output):
            document.release(config.out.output)  # a run that ended before its first line leaves no stream
    sys.exit(code)
