"""What a process of ours imports as it starts: every CLI command, every rank and every child imports
the package, and each module imported is CPU spent in every one of them (hundreds per test session).
A command line loads its own command's code; the modules every process loads leave out what only
one report needs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import rdmabench_env

# What a command must not load for its own work: the other commands' wings.
OTHER_WINGS = ("rdmabench.anchor.nixl", "rdmabench.storage.storage", "rdmabench.copy.copy", "rdmabench.cli.anchor")


def _modules_after(code: str) -> set[str]:
    """The modules loaded by a fresh interpreter after running `code` (a command's SystemExit included)."""
    probe = f"import json, sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=rdmabench_env(), timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


@pytest.mark.parametrize("command", ["check", "doctor"])
def test_a_command_loads_its_own_code_not_the_other_commands(command: str) -> None:
    """Every command's module was imported by the group (the NIXL anchor, storage and copy wings for a
    `check`): now only the command asked for."""
    code = f"sys.argv = ['rdmabench', {command!r}, '--help']; from rdmabench.cli import main; main()"
    loaded = _modules_after(code)
    assert f"rdmabench.cli.{command}" in loaded
    assert not loaded & set(OTHER_WINGS), sorted(loaded & set(OTHER_WINGS))


def test_every_command_is_still_listed_and_a_typo_still_gets_a_suggestion() -> None:
    """Loading lazily loses no command: the group's help lists all eight, and a mistyped name is one
    line naming the command meant."""
    listed = subprocess.run([sys.executable, "-m", "rdmabench", "--help"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    for command in ("anchor", "check", "compare", "copy", "doctor", "report", "run", "storage"):
        assert f"\n  {command} " in listed.stdout, listed.stdout
    typo = subprocess.run([sys.executable, "-m", "rdmabench", "rn"], capture_output=True, text=True, timeout=60)
    lines = typo.stderr.strip().splitlines()
    assert typo.returncode == 2 and len(lines) == 1 and "'run'" in lines[0], typo.stderr


def test_the_modules_every_process_loads_leave_out_the_web_client() -> None:
    """escape.xml_attribute (JUnit files only) imported xml.sax.saxutils at the top of a module every
    process imports, and with it urllib.request, http.client and email: 30-40 ms of CPU in every
    CLI command and every rank."""
    loaded = _modules_after("import rdmabench.errors, rdmabench.job.rank")
    assert not loaded & {"urllib.request", "http.client", "email.parser", "xml.sax.saxutils"}
    from rdmabench.escape import xml_attribute

    assert xml_attribute('a "b" <c>') == "'a \"b\" &lt;c&gt;'"


def test_the_launcher_loads_the_job_config_without_the_engine() -> None:
    """`run --np N` imports job.config and job.spawner; the package's __init__ imported job.run with
    them (the measurement engine, the protocols, the preflight), which only the ranks run."""
    loaded = _modules_after("import rdmabench.job.config, rdmabench.job.spawner")
    assert not loaded & {"rdmabench.job.run", "rdmabench.job.sweep", "rdmabench.job.preflight"}
    from rdmabench.job import RunConfig, run_job
    from rdmabench.job.config import RunConfig as Config
    from rdmabench.job.run import run_job as run

    assert RunConfig is Config and run_job is run
