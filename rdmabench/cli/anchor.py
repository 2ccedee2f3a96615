"""`rdmabench anchor`: rdmabench beside ucx_perftest, or beside NIXL, on this machine."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from .. import userfiles
from ..anchor.nixl import NIXL_VARIANTS
from ..anchor.nixl_row import NixlDocument, NixlRow
from ..errors import ConfigError, LaunchError, ResultsWriteError
from ..escape import visible_lines
from ..job.sizes import model_handoff
from ..measure.beside import asked
from ..measure.kvhandoff import KV_LAYOUTS
from ..units import parse_sizes
from .blocklists import blocks_option, files_read, layout_option, model_options, posting_option
from .group import SETTINGS, Written, fail, main, names, say, seconds_within, writes
from .options import beside_option, choices, group, renamed, sizes_option

if TYPE_CHECKING:
    from ..anchor.anchor import AnchorDocument, AnchorRow

ANCHORS = ("perftest", "nixl")

# The NIXL anchor's options: run's block-list options (several counts and layouts, each a list of its
# own), its handoff and its --beside, and NIXL's own. With their defaults: the ucx_perftest anchor
# refuses them.
nixl_options = group(
    blocks_option(several=True, default=" [default: 1024]"),
    layout_option(several=True, default=" [default: random]"),
    model_options,
    click.option(
        "--nixl-threads",
        type=int,
        default=0,
        metavar="N",
        help="With --against nixl: the threads of NIXL's UCX backend (num_threads; vLLM's connector passes 4); 0: "
        "NIXL's default.",
    ),
    click.option(
        "--nixl-seconds",
        type=click.FloatRange(min=0.01, max=600),
        callback=seconds_within(600),
        default=1.0,
        metavar="S",
        help="With --against nixl: seconds of NIXL's timed transfers per list and run (at least 5 transfers), "
        "and as many of its contiguous reference.",
        show_default=True,
    ),
    posting_option,
    click.option(
        "--nixl-timeout",
        type=float,
        default=600.0,
        callback=seconds_within(86400),
        metavar="S",
        help="With --against nixl: seconds the anchor waits for a pair of NIXL's ends before it stops them as frozen.",
        show_default=True,
    ),
    click.option(
        "--nixl",
        "variants",
        default=",".join(NIXL_VARIANTS),
        metavar=choices(NIXL_VARIANTS) + "[,...]",
        help="With --against nixl: how NIXL posts, a row each: "
        + "; ".join(f"{name}: {text}" for name, text in NIXL_VARIANTS.items())
        + ".",
        show_default=True,
    ),
    beside_option(
        "With --against nixl --mode device (two GPUs): both sides' lists also while each end's GPU computes; "
        "each row then gives both sides' GB/s beside it, alone, and the model's slowdown. Loads:"
    ),
)
_NIXL_ONLY = {
    "counts": None, "layouts": None, "model": None, "kv_layout": KV_LAYOUTS[0], "prompt": None, "nixl_threads": 0,
    "nixl_seconds": 1.0, "nixl_timeout": 600.0, "posting": "auto", "variants": ",".join(NIXL_VARIANTS), "beside": "none",
}  # fmt: skip
_OPTION_NAMES = {
    "counts": "--blocks",
    "layouts": "--layout",
    "variants": "--nixl",
}  # the others: their parameter's name


# Which anchor, on which memory, sizes and tests, how many times.
anchor_options = group(
    click.option(
        "--mode", default="host", metavar="host|device", help="Memory on both sides: host, or device (GPUs 0 and 1)."
    ),
    click.option(
        "--against",
        default=ANCHORS[0],
        metavar=choices(ANCHORS),
        help="The anchor: ucx_perftest (the C anchor), or NIXL's UCX backend moving the same block lists "
        "(pip install --no-deps nixl-cu13).",
    ),
    sizes_option(
        None,
        "Message sizes",
        "; with --against nixl the block sizes. [default: 8,1MiB,64MiB; with --against nixl 4KiB,64KiB,1MiB]",
    ),
    renamed(
        "--test",
        "--tests",
        "tests",
        default=None,
        help="Comma-separated: bw (vs tag_bw), lat (tag_lat), put (ucp_put_bw), get (ucp_get), put-lat (ucp_put_lat); "
        "with --mode device also bibw (vs both copy engines copying GPU0 <-> GPU1 at once) and incast (a rank a GPU, "
        "all to GPU 0, vs every GPU copying into GPU 0 at once). With --against nixl: put (WRITE), get (READ). "
        "[default: bw,lat; with --against nixl put]",
    ),
    nixl_options,
    click.option(
        "--repeat",
        default=1,
        type=click.IntRange(min=1),
        help="Run the whole comparison this many times; print each figure's median, each ratio's spread and the "
        "steady rounds' medians.",
    ),
)


@main.command(context_settings=SETTINGS)
@anchor_options
@writes(Written(("--output", "-o"), "output", "the anchor rows", "Also write the rows as JSON here."), reads=files_read)
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
    progress = lambda line: click.echo(visible_lines(line), err=True)  # noqa: E731
    rows: list[NixlRow] | list[AnchorRow]
    written: NixlDocument | AnchorDocument
    if against == "nixl":
        rows, text, written = _nixl_anchor(mode, sizes, tests, repeat, nixl_options, progress)
    else:
        rows, text, written = _perftest_anchor(against, mode, sizes, tests, repeat, nixl_options, progress)
    if output is not None:  # first: minutes of measurements must not hang on the table printing
        try:
            userfiles.write_text(output, json.dumps(written, indent=1))
        except OSError as exc:  # a disk that filled meanwhile: the rows still reach the terminal
            say(text)
            fail(ResultsWriteError(f"cannot write {output}: {exc.strerror or exc}; the rows are printed above"))
    say(text)
    if rows and rows[0].get("incomplete"):
        fail(LaunchError(str(rows[0]["incomplete"])))


def _perftest_anchor(
    against: str, mode: str, sizes: str | None, tests: str | None, repeat: int, options: dict[str, Any], progress: Any
) -> tuple[list[AnchorRow], str, AnchorDocument]:
    """The ucx_perftest anchor, which takes none of the NIXL anchor's options."""
    from ..anchor import anchor as anchor_module

    if against != "perftest":
        raise ConfigError(f"unknown anchor {against!r}: choose {' or '.join(ANCHORS)}")
    for name, default in _NIXL_ONLY.items():
        if options[name] != default:
            option = _OPTION_NAMES.get(name, f"--{name.replace('_', '-')}")
            raise ConfigError(f"{option} is an option of the NIXL anchor: add --against nixl")
    rows = anchor_module.compare(
        mode, parse_sizes(_given(sizes, "8,1MiB,64MiB")), names(_given(tests, "bw,lat")), repeat, progress=progress
    )
    written: AnchorDocument = {"schema": {"name": "rdmabench-anchor", "version": 1}, "rows": rows}
    return rows, anchor_module.format_rows(rows), written


def _given(value: str | None, default: str) -> str:
    """An option's value, or its default where it was not given: an empty value (`--test ''`) is a
    list of nothing, refused as such, never the default."""
    return default if value is None else value


def _nixl_anchor(
    mode: str, sizes: str | None, tests: str | None, repeat: int, options: dict[str, Any], progress: Any
) -> tuple[list[NixlRow], str, NixlDocument]:
    """`anchor --against nixl`: the plan from the options, the rows, their table and their document."""
    from ..anchor import nixl, nixl_table

    sets = {"--blocks": options["counts"], "--sizes": sizes}
    handoff = model_handoff(options["model"], options["kv_layout"], options["prompt"], sets)
    plan = nixl.NixlPlan(
        sizes=tuple(parse_sizes(_given(sizes, "4KiB,64KiB,1MiB"))),
        counts=options["counts"] or (1024,),
        layouts=options["layouts"] or ("random",),
        tests=tuple(names(_given(tests, "put"))),
        mode=mode,
        handoff=handoff,
        threads=options["nixl_threads"],
        seconds=options["nixl_seconds"],
        timeout=options["nixl_timeout"],
        posting=options["posting"],
        variants=tuple(dict.fromkeys(names(options["variants"]))),
        beside=asked(options["beside"]),  # read as run reads it; the plan runs one carve-out or refuses
    )
    rows = nixl.compare(plan, repeat, progress=progress)
    return rows, nixl_table.format_rows(rows), nixl_table.document(rows)
