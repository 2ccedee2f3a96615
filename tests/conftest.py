"""Shared helpers: run rdmabench for real, with real MPI ranks and real UCX endpoints."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

# Small and quick: CI oversubscribes 2 cores with the ranks, and every byte is still validated.
QUICK = ["--samples", "2", "--sample-time", "0.005"]


@pytest.fixture(scope="session", autouse=True)
def _bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test starts Python processes (the CLI, its ranks) that import rdmabench from this tree.
    Where PYTHONDONTWRITEBYTECODE is set, each compiled every module again, a third of a second of CPU
    a process; a bytecode cache of the session's own, outside the tree, compiles them once."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE")
        patch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path_factory.mktemp("pycache")))
        yield


# What every rank the tests start skips, on a machine without a GPU, where neither does anything the
# tests look at (measured on the 2-core CI VM, per process):
# - Open MPI's libfabric transport (btl ofi) sleeps a second in MPI_Init (clock_nanosleep(1 s);
#   MPI_Init 1.1 s with it, 0.1-0.2 s without, 0.06 s of CPU either way). Ranks of one machine talk
#   through shared memory, the namespace hosts through TCP; the data plane is UCX's, not MPI's.
# - UCX's memory hooks spin 0.4 s in sched_yield when UCX loads (0.6 s of CPU to load UCXX with them,
#   0.2 s without; doctor.py leaves them out of ucx_info for the same reason). They keep the memory
#   registration caches of InfiniBand and CUDA memory right; shared memory, CMA and TCP keep none.
#   UCX_MEM_EVENTS=no is recorded in each results file's ucx_env, as any UCX setting is.
QUICK_START = {"OMPI_MCA_btl": "^ofi", "UCX_MEM_EVENTS": "no"}


@pytest.fixture(scope="session", autouse=True)
def _quick_start() -> Iterator[None]:
    """QUICK_START in every process the tests start, where no GPU is visible and the caller did not
    set the variable (the GPU machine runs its tests as a user's job would)."""
    from rdmabench.hardware.gpu import visible_gpu_count

    with pytest.MonkeyPatch.context() as patch:
        if not visible_gpu_count():
            for name, value in QUICK_START.items():
                if name not in os.environ:
                    patch.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory of the session's own (RDMABENCH_CACHE_DIR; made by rdmabench, mode 0700):
    what runs keep there (the host copy's figure of a namespace host) goes with the session."""
    return tmp_path_factory.mktemp("cache") / "rdmabench"


def free_netns_subnet(first: int, last: int, rails: int = 3) -> int:
    """A base X for the namespace cluster's rails 10.213.X.0/24 to 10.213.(X + rails - 1).0/24 that no
    interface of this machine holds now: another test session (a second CI job on the same machine)
    may have a cluster up, and two bridges with one subnet mix their traffic. Starts from this
    process's id, so that sessions starting at once try different ones first."""
    shown = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout
    used = {int(m) for m in re.findall(r"inet 10\.213\.(\d+)\.", shown)}
    count = (last - first + 1) // rails
    for step in range(count):
        base = first + ((os.getpid() + step) % count) * rails
        if not used & set(range(base, base + rails)):
            return base
    return first + (os.getpid() % count) * rails


def rdmabench_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RDMABENCH_FAULT", None)
    env.update(extra)
    return env


def run_cli(
    args: list[str], timeout: float = 180, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rdmabench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or rdmabench_env(),
        cwd=cwd,
    )


def run_cli_here(args: list[str], timeout: float = 0) -> subprocess.CompletedProcess[str]:
    """`python -m rdmabench ARGS` as run_cli runs it, in this process: for a test of the CLI's own
    answer (a refusal, a help text, parsed options), where a process costs ~0.35 s of CPU, mostly
    imports, and this milliseconds. The same entry point and top-level error handling as the command
    (cli.main: one line and an exit code), the same sys.argv and program name, no RDMABENCH_FAULT;
    what escapes it is printed as Python prints it (a traceback, exit 1). Returns what run_cli
    returns. `timeout` is taken, and unused, so that a call reads as run_cli's does. A test of the
    process itself (signals, environment, launcher, ranks, files' modes) stays with run_cli: a command
    that starts a process here (mpiexec, ranks, a tool) fails the test, saying so."""
    import io
    import traceback

    import rdmabench
    from rdmabench.cli import main

    started: list[Any] = []  # what the command tried to start: the test fails, whatever the command made of it

    def no_process_here(command: Any, *rest: Any, **kwargs: Any) -> NoReturn:
        started.append(command)
        raise AssertionError(f"run_cli_here: the command starts a process ({command!r}): test it with run_cli")

    out, err = io.StringIO(), io.StringIO()
    code: int = 0
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        _process_state_kept(),
    ):
        patch.delenv("RDMABENCH_FAULT", raising=False)
        patch.setattr(sys, "argv", [str(Path(rdmabench.__file__).with_name("__main__.py")), *args])
        patch.setattr(subprocess, "Popen", no_process_here)
        try:
            main(prog_name="python -m rdmabench")
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:  # sys.exit("text"): Python prints it and exits 1
                print(exc.code, file=sys.stderr)
                code = 1
        except Exception:
            traceback.print_exc()
            code = 1
    assert not started, f"run_cli_here: the command starts a process ({started[0]!r}): test it with run_cli"
    return subprocess.CompletedProcess([sys.executable, "-m", "rdmabench", *args], code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _process_state_kept() -> Iterator[None]:
    """The environment, working folder, umask and signal handlers set back as they were before the block:
    what a command may change of its process, which a process of its own would take with it when it
    exits, so that no later test of this worker sees it (the results file's reservation is an
    environment variable; run installs its signal handlers)."""
    environ, cwd, mask = dict(os.environ), os.getcwd(), os.umask(0o022)
    os.umask(mask)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)}
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        os.umask(mask)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def refused_in_one_line(tmp_path: Path, args: list[str], message: str, process: bool = False) -> None:
    """`rdmabench run ARGS` is refused before any rank starts: exit 2, one line naming `message`,
    and no results file. In this process (run_cli_here: it fails where a process starts), or with
    `process`, in a process of its own (a refusal of the files it is given: their modes, links, kinds)."""
    command = ["run", "--np", "2", "-o", str(tmp_path / "r.json"), *args]
    proc = run_cli(command) if process else run_cli_here(command)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "r.json").exists()


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def mpiexec() -> str:
    from rdmabench.job.spawner import find_mpiexec

    return find_mpiexec()


# Real results files copied from measurements/ (tests/data/results/README.md says which).
RESULTS_DATA = Path(__file__).resolve().parent / "data" / "results"


def million_sources() -> dict[str, str]:
    """devtools.million's real source runs, read from the tests' copies."""
    from devtools.million import SOURCES

    return {link: str(RESULTS_DATA / Path(source).name) for link, source in SOURCES.items()}


@pytest.fixture
def results_path(tmp_path: Path) -> Path:
    return tmp_path / "out.json"


def chromium() -> str | None:
    """A headless-capable Chromium on PATH (.ci/run installs Debian's), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


needs_chromium = pytest.mark.skipif(chromium() is None, reason="needs a headless Chromium (.ci/run installs Debian's)")
_BROWSER_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Open `page` in a headless Chromium with its own profile directory; by default dump the DOM
    after the page's scripts have run."""
    browser = chromium()
    assert browser is not None
    action = list(args) or ["--virtual-time-budget=10000", "--dump-dom"]
    return subprocess.run(
        [browser, *_BROWSER_FLAGS, f"--user-data-dir={profile}", *action, page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """pyproject's `-n auto`: two workers, since a test spends most of its time waiting on its ranks
    (MPI's and UCX's start, the launcher, the watchdogs' timeouts), and every file keeps its own paths,
    namespace prefixes and subnets. No workers where timings are the point (`-m perf`, `-m gpu`, a
    machine with a GPU: another worker's load would bend the figures), nor for one file."""
    selected = config.getoption("markexpr") or ""
    if "perf" in selected.replace("not perf", "") or "gpu" in selected:
        return 0
    files = {arg.split("::")[0] for arg in config.args}
    if len(files) == 1 and Path(next(iter(files))).is_file():
        return 0
    from rdmabench.hardware.gpu import visible_gpu_count

    return 0 if visible_gpu_count() else 2


class StandInLoad:
    """A stand-in for the GPU's compute load (wire.gpuload.ComputeLoad, which needs a GPU): it finishes
    `step` operations each time it is asked, each of `alone` seconds, or `beside` seconds while `busy`
    (`carved` times either in a run started on a carve-out's plan), and keeps only the latest `ring`
    of them, as the library does."""

    def __init__(self, step: int, ring: int, alone: float = 1e-3, beside: float = 2e-3, carved: float = 1.0):
        self.step, self.ring, self.times, self.busy, self.running = step, ring, [alone, beside], False, False
        self.work, self.partition, self.seconds = 2.0e9, None, list[float]()
        self.carved, self.where, self.carveout = carved, 0, 0
        self.error: str | None = None  # as the library's thread ends on a CUDA error: no more operations

    def failed(self) -> bool:
        return self.error is not None

    def carve(self, sms: int) -> None:
        assert not self.running, "a carve-out is planned while the load is stopped"  # as the library needs
        self.carveout = sms

    def start(self, where: int = 0) -> None:
        assert not self.running, "the compute load is running already"  # as the library refuses
        self.seconds, self.running, self.where = [], True, where
        self.starts = getattr(self, "starts", 0) + 1

    def done(self) -> int:
        if self.running and self.error is None:
            scale = self.carved if self.where == 2 else 1.0
            self.seconds += [self.times[self.busy] * scale] * self.step
        return len(self.seconds)

    def stop(self) -> Any:
        from rdmabench.errors import TransportError
        from rdmabench.wire.gpuload import LoadRun

        self.running = False
        if self.error is not None:
            raise TransportError(f"the compute load: {self.error}")
        return LoadRun(self.seconds[-self.ring :], 0.0)
