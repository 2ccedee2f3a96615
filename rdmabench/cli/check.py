"""`rdmabench check`: pass or fail, the suspect parts first, against floors and/or a baseline run."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from .. import userfiles
from ..errors import ConfigError, RdmabenchError
from ..escape import visible
from ..results.verdicts.verdict import DEFAULT_FLOORS
from . import reading
from .group import SETTINGS, Written, fail, main, writes
from .options import expect_option, selection_options, tolerance_option

if TYPE_CHECKING:
    from ..results.files.filters import Filters
    from ..results.verdicts.nodes import ClusterNodes

FLOOR_HELP = (
    "A floor as a share of the physical limit, per limit kind (NVLink, PCIe, NIC, 'host memory copy') "
    "or link class ('same GPU', intra-node, inter-node, all); repeatable. 'default': "
    + ", ".join(f"{k}={v}" for k, v in DEFAULT_FLOORS.items())
    + ", and each link against its class in the run: below the class median less 3 or more robust spreads "
    "(and at least 5% below it), or one of a suspect part's slow links, it fails. 'slowdown=F': a ceiling on "
    "how much a link run with --beside may slow the model's compute (1.05: 5%)."
)


def _node_options(command: Any) -> Any:
    """--nodes FILE and --nodes-from-slurm: the cluster's real nodes, the drain list's allow-list."""
    slurm = click.option(
        "--nodes-from-slurm",
        is_flag=True,
        help="The drain list names only nodes Slurm lists (`sinfo -N -h -o %N`, else `scontrol show hostnames`). "
        "The default with --drain where Slurm is on PATH (a name it cannot check is left out); without it "
        "(and no --nodes) the list says its names were not checked.",
    )
    named = click.option(
        "--nodes",
        "nodes_path",
        default=None,
        metavar="FILE",
        help="The cluster's node names, one a line: the drain list names only these (with --drain).",
    )
    return named(slurm(command))


@main.command(context_settings=SETTINGS)
@click.argument("paths", nargs=-1, required=True)
@expect_option(FLOOR_HELP)
@click.option("--baseline", default=None, help="Results file or directory each link must be no worse than.")
@tolerance_option(0.1, "How much worse than the baseline a link may be.")
@writes(
    Written(("--json",), "json_path", "the verdict", "Write the verdict and the suspects as JSON here."),
    Written(("--junit",), "junit_path", "the verdict", "Write JUnit XML here (one case per link)."),
    Written(
        ("--drain",),
        "drain_path",
        "the drain list",
        "Write a Slurm drain list here: the hosts of the suspect parts, as a hostlist and one `scontrol "
        "update NodeName=... State=DRAIN` line each (never run: review, then run them yourself).",
    ),
    reads=lambda given: reading.results_inputs(
        given["paths"],
        given["baseline"],
        given["nodes_path"],
        outputs=[given[k] for k in ("json_path", "junit_path", "drain_path")],
    ),
)
@_node_options
@selection_options
def check(
    paths: tuple[str, ...], expect: dict[str, float], baseline: str | None, tolerance: float, **kwargs: Any
) -> None:
    """Pass or fail: names the suspect parts first (a GPU, NIC, host, pair of hosts or single link
    that explains the slow links, with its evidence), then judges every link at its largest size
    against a floor (a share of its physical limit; with `default` also its class in the run) and/or
    a baseline run. Exit status 1 when a link fails or a part is suspect, 0 when all pass, 3
    (REMEASURE) when nothing failed but single slow figures, never measured again, are to measure
    again (the command is printed), 2 for bad input or when there is no verdict: nothing matched, no
    floor applied to any link, or no link was in the baseline, and nothing is suspect (never a pass on
    nothing)."""
    from ..results.verdicts.drain import share
    from ..results.verdicts.hostlist import compress

    json_path, junit_path, drain_path, force = (
        kwargs.pop(name) for name in ("json_path", "junit_path", "drain_path", "force")
    )
    try:
        nodes = _nodes(kwargs.pop("nodes_path"), kwargs.pop("nodes_from_slurm"), drain_path)
        files = _Outputs(json_path, junit_path, drain_path, force, nodes)
        if not expect and baseline is None:
            raise ConfigError("give --expect (a floor per limit kind or link class) or --baseline, or both")
        if not 0 <= tolerance < 1:
            raise ConfigError(f"--tolerance must be at least 0 and below 1, not {tolerance}")
        checked, drained = _check(paths, expect, baseline, tolerance, reading.filters(**kwargs), files)
    except RdmabenchError as exc:
        fail(exc)
    except OSError as exc:
        fail(ConfigError(f"cannot write the verdict: {exc}"))
    click.echo(checked.text())
    if drained is not None:
        drain, hosts, refused = drained
        named = compress(d.host for d in drain) if drain else "no host"
        click.echo(f"drain list: {visible(drain_path)} ({named}: {share(drain, hosts, refused)})")
    sys.exit(checked.exit_code)


@dataclass(frozen=True)
class _Outputs:
    """The files `check` writes beside its verdict, and the cluster's nodes a drain list is checked against."""

    json_path: str | None
    junit_path: str | None
    drain_path: str | None
    force: bool
    nodes: ClusterNodes | None


def _nodes(path: str | None, from_slurm: bool, drain_path: str | None) -> ClusterNodes | None:
    """The cluster's nodes the drain list is checked against (results.verdicts.nodes), or None."""
    from ..results.verdicts import nodes

    if path is None and not from_slurm:
        return nodes.by_default() if drain_path is not None else None  # Slurm's, where it is here
    if drain_path is None:
        raise ConfigError("--nodes and --nodes-from-slurm only with --drain (they check the drain list's hosts)")
    if path is not None and from_slurm:
        raise ConfigError("give --nodes FILE or --nodes-from-slurm, not both")
    return nodes.from_file(path) if path is not None else nodes.from_slurm()


def _check(
    paths: tuple[str, ...],
    floors: dict[str, float],
    baseline: str | None,
    tolerance: float,
    chosen: Filters,
    files: _Outputs,
) -> tuple[Any, Any]:
    """The verdict and the drain list (None without --drain), their files written."""
    from ..results.verdicts.attribution import attribute
    from ..results.verdicts.drain import ran_on, refusals, write_drain_list
    from ..results.verdicts.outcome import conclude, no_verdict

    loaded = reading.load(paths)
    rows = reading.aggregate(loaded, chosen)  # a run whose links file is damaged: left out, its hosts too
    base_loaded = reading.load((baseline,)) if baseline is not None else None
    base = reading.aggregate(base_loaded, chosen) if base_loaded is not None else None
    if not rows:
        raise ConfigError("no results match the filters")
    found = attribute(rows)
    conflicts = [*loaded.conflicts, *(base_loaded.conflicts if base_loaded is not None else ())]
    checked = conclude(rows, floors, base, tolerance, found, conflicts)
    if checked.outcome == "INCONCLUSIVE":
        click.echo("\n".join(checked.suspect_lines()))
        raise no_verdict(checked)
    if files.json_path is not None:
        userfiles.write_chunks(files.json_path, checked.json_chunks())  # a million passed links, a line each
    if files.junit_path is not None:
        userfiles.write_text(files.junit_path, checked.junit())
    drain_path = files.drain_path
    if drain_path is None:
        return checked, None
    hosts = ran_on(loaded.documents)  # a drain list names only hosts the results' own ranks ran on
    drain = write_drain_list(drain_path, found, hosts, force=files.force, nodes=files.nodes)
    return checked, (
        drain,
        hosts,
        refusals(found, hosts, nodes=files.nodes),
    )  # a refused host costs only its own line
