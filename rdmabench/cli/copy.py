"""`rdmabench copy`: host-device and device-device copies on one machine (CuPy, or PyTorch's path)."""

from __future__ import annotations

import click

from ..copy.copy import DIRECTIONS, HOST_KINDS
from ..errors import ConfigError
from ..results.files import document
from ..units import parse_sizes
from .group import SETTINGS, Written, command_line, count, main, names, say, writes
from .options import sizes_option

FRAMEWORKS = ("cupy", "torch")


@main.command("copy", context_settings=SETTINGS)
@sizes_option("1MiB,64MiB,256MiB", "Copy sizes")
@click.option("--directions", default=",".join(DIRECTIONS), help="Comma-separated: " + ", ".join(DIRECTIONS) + ".")
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
@writes(Written(("--output", "-o"), "output", "results", "Results file. [default: results/rdmabench-copy-<time>.json]"))
@click.option(
    "--framework",
    default=FRAMEWORKS[0],
    metavar="|".join(FRAMEWORKS),
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
    if framework != "cupy":
        _torch_copy(framework, sizes, gpus, samples, output, force)
        return
    _cupy_copy(sizes, names(directions), names(host_memory), gpus, together, overlap, samples, output, force)


def _cupy_copy(
    sizes: str,
    directions: list[str],
    kinds: list[str],
    gpus: str,
    together: bool,
    overlap: bool,
    samples: int,
    output: str | None,
    force: bool,
) -> None:
    from ..copy import copy as copy_module
    from ..hardware.gpu import visible_gpu_count

    size_list = parse_sizes(sizes)
    for d in directions:
        if d not in DIRECTIONS:
            raise ConfigError(f"unknown direction {d!r}: choose from {', '.join(DIRECTIONS)}")
    for k in kinds:
        if k not in HOST_KINDS:
            raise ConfigError(f"unknown host memory {k!r}: choose from {', '.join(HOST_KINDS)}")
    if not 1 <= samples <= 1000:
        raise ConfigError(f"--samples must be between 1 and 1000, not {samples}")
    chosen = None if gpus == "all" else [count(g, "--gpus") for g in names(gpus, "--gpus")]
    cupy = copy_module.require_gpu()
    visible = visible_gpu_count()
    gpu_list = list(range(visible)) if chosen is None else chosen
    if not gpu_list or any(g >= visible for g in gpu_list):
        raise ConfigError(f"--gpus {gpus!r}: this machine has GPUs 0..{visible - 1}")
    if output is None:
        output = document.default_output_path("copy", "host", "device", reserve_it=False)
    document.check_writable(output, force)
    doc = copy_module.run(cupy, size_list, directions, kinds, gpu_list, together, overlap, samples, say)
    doc["metadata"]["command_line"] = command_line()
    document.write(output, doc)
    click.echo(f"# results written to {output}")


def _torch_copy(framework: str, sizes: str, gpus: str, samples: int, output: str | None, force: bool) -> None:
    from ..copy import torchcopy

    if framework != "torch":
        raise ConfigError(f"unknown --framework {framework!r}: choose cupy or torch")
    size_list = parse_sizes(sizes)
    if not 1 <= samples <= 1000:
        raise ConfigError(f"--samples must be between 1 and 1000, not {samples}")
    gpu = 0 if gpus == "all" else count(gpus.split(",")[0].strip(), "--gpus")
    torchcopy.require_cuda(torchcopy.import_torch())
    if output is None:
        output = document.default_output_path("copy-torch", "host", "device", reserve_it=False)
    document.check_writable(output, force)
    doc = torchcopy.run(size_list, samples, gpu, say)
    doc["metadata"]["command_line"] = command_line()
    document.write(output, doc)
    click.echo(f"# results written to {output}")
