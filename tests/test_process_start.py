"""Every process rdmabench starts imports only from its installation: a `rdmabench/` package or a
`numpy.py` left in the working folder (a shared /tmp, a project scratch) never runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmabench import pystart

from .conftest import QUICK, rdmabench_env

REPO = Path(__file__).resolve().parents[1]
# The console script `rdmabench` (its own folder first on the path), here with the current folder
# that PYTHONPATH's empty entry adds left out: the ranks must leave it out themselves.
INSTALLED = (
    "import os, sys; sys.path[:] = [p for p in sys.path[1:] if p and p != os.getcwd()]; "
    "from rdmabench.cli import main; main()"
)


def _plant(folder: Path) -> Path:
    """What another user leaves in a shared folder: both write `marker` when imported."""
    marker = folder / "planted-code-ran"
    writes = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (folder / "rdmabench").mkdir()
    (folder / "rdmabench" / "__init__.py").write_text(writes)
    (folder / "numpy.py").write_text(writes)
    return marker


def test_ranks_started_in_a_folder_with_a_planted_package_import_only_the_installation(tmp_path: Path) -> None:
    """`run --np 2` from a folder holding `rdmabench/` and `numpy.py`; PYTHONPATH with an empty entry
    (`PYTHONPATH=$PYTHONPATH:/x` with nothing before: the current folder) is followed but for it."""
    marker = _plant(tmp_path)
    out = tmp_path / "r.json"
    env = rdmabench_env(PYTHONPATH=f"{REPO}{os.pathsep}")
    proc = subprocess.run(
        [sys.executable, "-c", INSTALLED, "run", "--np", "2", "--sizes", "8", *QUICK, "-o", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert not marker.exists(), marker.read_text()
    assert proc.returncode == 0, proc.stderr
    assert out.exists()


def test_code_and_modules_started_through_pystart_ignore_the_working_folder(tmp_path: Path) -> None:
    """The helper's argv, as the anchors, the NIXL ends and the benchmarks get it (numpy and
    rdmabench from the installation), and as the reaper gets it (-S: without site)."""
    marker = _plant(tmp_path)
    env = rdmabench_env(PYTHONPATH=f"{os.pathsep}{REPO}")
    code = "import numpy, rdmabench; print(rdmabench.__file__)"
    for argv in (pystart.python_code(code), pystart.python_module("rdmabench.reaper", bare=True)):
        proc = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
        assert not marker.exists(), marker.read_text()
        assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # the reaper, with nothing to remove
    assert subprocess.run(
        pystart.python_code(code), cwd=tmp_path, env=env, capture_output=True, text=True
    ).stdout.strip() == str(REPO / "rdmabench" / "__init__.py")


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_the_boot_line_leaves_the_working_folder_out_on_every_python(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On each Python the package supports that is installed here (`-P` came only with 3.11): a
    module of a package on PYTHONPATH runs, a planted package of the same name and a planted `json`
    (standard library's name) in the working folder do not, with and without site."""
    python = shutil.which(f"python{version}")
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    if (
        python is None
        or subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.strip() != version
    ):
        pytest.skip(f"no python{version} here")  # (a pyenv shim of a version not selected answers, wrongly)
    root, cwd = tmp_path / "root", tmp_path / "cwd"
    (root / "pkgx").mkdir(parents=True)
    (root / "pkgx" / "__init__.py").write_text("")
    (root / "pkgx" / "mod.py").write_text("import json, sys; print(json.dumps(sys.argv[1:]))\n")
    cwd.mkdir()
    marker = _plant(cwd)
    (cwd / "pkgx").mkdir()
    (cwd / "pkgx" / "__init__.py").write_text((cwd / "numpy.py").read_text())
    (cwd / "json.py").write_text((cwd / "numpy.py").read_text())
    monkeypatch.setattr(pystart.sys, "executable", python)
    monkeypatch.setattr(pystart, "installation_root", lambda: str(root))
    for argv, path in ((pystart.python_module("pkgx.mod", "a", "b"), f"{root}{os.pathsep}"),
                       (pystart.python_module("pkgx.mod", "a", "b", bare=True), "")):  # fmt: skip
        env = dict(os.environ, PYTHONPATH=path)
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout == '["a", "b"]\n', proc.stderr
    assert not marker.exists(), marker.read_text()


def test_the_anchors_inner_run_ignores_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`anchor`'s own `rdmabench run --np 2` (bench.anchor.run_entries), started from a planted folder."""
    from rdmabench.anchor.anchor import run_entries

    marker = _plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    (entry,) = run_entries(["--sizes", "8"], samples=2, sample_time=0.005)
    assert entry["size_bytes"] == 8 and not marker.exists()


def test_no_process_is_started_around_the_helper() -> None:
    """One way to start Python: no module but pystart puts sys.executable into an argv."""
    starts = re.compile(r"\[\s*sys\.executable\s*,|\"-m\",\s*\"rdmabench")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in (REPO / "rdmabench").rglob("*.py")
        if path.name != "pystart.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if starts.search(line)
    ]
    assert found == []


CONSOLE_SCRIPT = Path(sys.executable).with_name("rdmabench")


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="no installed console script beside this Python")
def test_the_console_script_leaves_out_the_folder_an_empty_pythonpath_entry_adds(tmp_path: Path) -> None:
    """The user's own `rdmabench` (the installed command) in a folder holding `numpy.py`, with
    `PYTHONPATH=:/x`: the planted module never runs, and one line says why the folder was left out."""
    marker = tmp_path / "planted-code-ran"
    (tmp_path / "numpy.py").write_text(f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n")
    env = rdmabench_env(PYTHONPATH=f"{os.pathsep}{tmp_path / 'elsewhere'}")
    report = tmp_path / "r.json"
    report.write_text("{}")
    proc = subprocess.run(
        [str(CONSOLE_SCRIPT), "report", str(report)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert not marker.exists(), marker.read_text()
    warnings = [line for line in proc.stderr.splitlines() if "PYTHONPATH" in line]
    assert warnings == [
        f"rdmabench: warning: PYTHONPATH has an empty entry, which puts the current folder {tmp_path} on the "
        "import path: left out (name it in PYTHONPATH to keep it)"
    ], proc.stderr
    named = subprocess.run(  # a folder PYTHONPATH names is the user's choice: kept, and nothing said
        [str(CONSOLE_SCRIPT), "--version"], cwd=tmp_path / "..", env=rdmabench_env(PYTHONPATH=str(tmp_path / "x")),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert named.returncode == 0 and "PYTHONPATH" not in named.stderr
