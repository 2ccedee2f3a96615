"""`rdmabench doctor`: what on this machine helps or hurts transfers."""

from __future__ import annotations

import json
import sys

import click

from ..errors import ConfigError
from .group import SETTINGS, fail, main
from .options import format_option


@main.command(context_settings=SETTINGS)
@format_option(("table", "json"), "A table for people, or JSON.")
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
    from ..hardware import doctor as doctor_module

    if output_format not in ("table", "json"):
        fail(ConfigError(f"unknown format {output_format!r}: choose table or json"))
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
