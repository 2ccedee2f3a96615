"""`rdmabench storage`: a file read into GPU (or host) memory and written back, by each path."""

from __future__ import annotations

from typing import Any

import click

from ..errors import ResourceError
from ..results.files import document
from ..units import parse_sizes
from .group import SETTINGS, Written, command_line, count, fail, main, names, say, writes
from .options import group, renamed, sizes_option

# What is read or written, by which paths, into which memory, how often.
storage_options = group(
    click.option(
        "--size",
        default=None,
        metavar="SIZE",
        help="Create FILE with this many bytes of rdmabench's pattern first (removed at the end unless --keep). "
        "Without it FILE must exist (made by an earlier --keep run, or any file with --no-validate).",
    ),
    click.option(
        "--test", "tests", default="read", help="Comma-separated: read (storage-read), write (storage-write)."
    ),
    click.option(
        "--paths",
        default=None,
        help="Comma-separated: pageable (read() + copy: the bounce), pinned (O_DIRECT into pinned buffers, pipelined "
        "copies), kvikio (KvikIO CuFile: GPUDirect Storage or its POSIX mode). [default: every one this machine can run]",
    ),
    renamed(
        "--mode",
        "--memory",
        "memory",
        default=None,
        metavar="device|host",
        help="Into GPU or host memory. [default: device with a GPU]",
    ),
    sizes_option(None, "Request sizes", " (O_DIRECT: multiples of 4 KiB). [default: 1MiB,16MiB, those the file holds]"),
    click.option("--threads", default="1", help="Comma-separated: requests in flight (one worker thread each)."),
    renamed(
        "--stage-buffers",
        "--buffers",
        "buffers",
        default=2,
        help="Pinned buffers per worker of the pinned path (2: double buffering).",
    ),
    click.option("--samples", default=3, help="Timed passes over the whole file per point."),
    click.option("--gpu", default=0, help="The GPU to read into."),
    click.option("--validate/--no-validate", default=True, help="Check every byte that landed (untimed)."),
    click.option("--keep", is_flag=True, help="Keep the file --size created."),
)


@main.command("storage", context_settings=SETTINGS)
@click.argument("file", type=click.Path())
@storage_options
@writes(
    Written(("--output", "-o"), "output", "results", "Results file. [default: results/rdmabench-storage-<time>.json]"),
    reads=lambda given: [given["file"]],  # the file it measures: never replaced by its results
)
def storage_command(file: str, size: str | None, tests: str, paths: str | None, **options: Any) -> None:
    """Read a file into GPU (or host) memory, and write memory to a file, by each path side by side:
    GB/s (1e9 B/s) over the whole file, per-request latency, CPU seconds per GB, and the limits (the
    device's own O_DIRECT rate, measured; the GPU's PCIe link). Every byte that landed is checked."""
    from ..storage import storage as storage_module

    output, force = options.pop("output"), options.pop("force")
    try:
        config = storage_module.StorageConfig(
            file=file,
            create_size=parse_sizes(size)[0] if size else None,
            tests=names(tests),
            paths=names(paths) if paths else None,
            sizes=parse_sizes(sizes) if (sizes := options.pop("sizes")) else None,
            threads=[count(t, "--threads") for t in names(options.pop("threads"))],
            **options,
        )
        storage_module.check(config)
        if output is None:
            output = document.default_output_path("storage", "file", config.memory or "memory", reserve_it=False)
        document.check_writable(output, force)
        doc = storage_module.run(config, say)
        doc["metadata"]["command_line"] = command_line()
        document.write(output, doc)
        click.echo(f"# results written to {output}")
    except OSError as exc:  # a file that vanished or cannot be read mid-run: one line, not a traceback
        fail(ResourceError(f"{exc.filename or file}: {exc.strerror or exc}"))
