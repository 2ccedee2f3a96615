"""What rdmabench loads or writes under shared directories (/tmp, /dev/shm, a cache) is its user's own.

Another user of the node (a real second user, created here when the tests run as root) plants what a
hostile neighbour would: a directory at the name the native loop's cache will use, a library in it, a
lock that is a symlink to one of the victim's files, a link where `storage --test write` puts its
file. The victim must neither load the library nor write through the links, and must say why. And a
launcher killed outright leaves no ranks, no shared-memory segments and no directories behind.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rdmabench import privatedirs
from rdmabench.errors import UnsafePathError
from rdmabench.wire import native

from .conftest import rdmabench_env, run_cli

REPO = Path(__file__).resolve().parent.parent
# A library that, once loaded, leaves a mark: the proof that it ran in the victim's process.
PLANTED_C = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    const char *mark = getenv("RB_PLANTED_MARK");
    if (mark) close(open(mark, O_WRONLY | O_CREAT, 0600));
}
"""
PRECIOUS = b"the victim's own file\n"


@pytest.fixture(scope="module")
def neighbour() -> Iterator[str]:
    """A second, unprivileged user of this machine (root only: it takes useradd)."""
    if os.geteuid() != 0 or not (shutil.which("useradd") and shutil.which("runuser")):
        pytest.skip("a second user is created only when the tests run as root (useradd, runuser)")
    name = f"rbnb{os.getpid() % 100000}"
    subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


def as_neighbour(name: str, script: str) -> None:
    subprocess.run(["runuser", "-u", name, "--", "/bin/sh", "-ec", script], check=True, timeout=30)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory like /tmp: everyone may create in it (mode 1777), nobody may remove another's entry."""
    path = Path(tempfile.mkdtemp(prefix="rdmabench-test-shared-", dir="/tmp"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def planted_source() -> Iterator[Path]:
    """The planted library, built once; anyone may read it (to copy it where a victim looks)."""
    folder = Path(tempfile.mkdtemp(prefix="rdmabench-test-planted-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "planted.c").write_text(PLANTED_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(folder / "planted.so"), str(folder / "planted.c")], check=True)
    (folder / "planted.so").chmod(0o755)
    yield folder / "planted.so"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def victim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: Path) -> Path:
    """This process as the victim: a first-use build (no install-time library), a cache directory that
    cannot be made (a read-only home), the shared directory as its temporary one; returns the file of
    the victim's that a planted link points at."""
    monkeypatch.setattr(native.load, "kept", None)
    monkeypatch.setenv("RDMABENCH_NATIVE", "build")
    monkeypatch.setenv("RB_PLANTED_MARK", str(tmp_path / "planted-library-ran"))
    blocker = tmp_path / "read-only-home"
    blocker.write_text("")
    monkeypatch.setenv("RDMABENCH_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    precious = tmp_path / "precious"
    precious.write_bytes(PRECIOUS)
    return precious


def _library_name(compiler: str = "cc") -> str:
    """The name the victim's loader looks for: anyone can work it out."""
    prefix = native.ucx_prefix()
    assert prefix is not None
    return native.library_name(prefix, [compiler])


def _planted_ran(tmp_path: Path) -> bool:
    return (tmp_path / "planted-library-ran").exists()


@pytest.mark.skipif(native.ucx_prefix() is None, reason="no UCX headers (the libucx wheel)")
@pytest.mark.parametrize("plant", ["library", "lock"])
def test_a_neighbours_cache_directory_is_refused(
    neighbour: str,
    shared: Path,
    planted_source: Path,
    victim: Path,
    tmp_path: Path,
    plant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The neighbour creates the victim's predictable /tmp cache directory first and plants, in it,
    the library the victim would load, or the build lock as a symlink to the victim's file."""
    predicted = shared / f"rdmabench-{os.geteuid()}"
    what = {
        "library": f"cp {planted_source} {predicted / _library_name()}",
        "lock": f"ln -s {victim} {predicted / '.build.lock'}",
    }[plant]
    as_neighbour(neighbour, f"mkdir -m 0777 {predicted}; {what}")
    monkeypatch.setenv("CC", "cc")
    built = native.load()
    assert built.library is None
    assert f"refusing {predicted}: it belongs to user {neighbour} (uid " in built.reason, built.reason
    assert "\n" not in built.reason
    assert not _planted_ran(tmp_path) and victim.read_bytes() == PRECIOUS
    assert not list(predicted.glob("hotloop-*.so")) or plant == "library"  # nothing built in the neighbour's


@pytest.mark.skipif(native.ucx_prefix() is None, reason="no UCX headers (the libucx wheel)")
def test_a_cache_others_can_write_is_refused_and_so_is_a_library_others_can_write(
    planted_source: Path, victim: Path, tmp_path: Path, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ours, but writable by anyone (an old umask, a careless chmod): anyone could have put the library there."""
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))  # refused, nothing is built either
    open_dir = shared / f"rdmabench-{os.geteuid()}"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    shutil.copy(planted_source, open_dir / _library_name(str(tmp_path / "no-such-cc")))
    built = native.load()
    assert built.library is None and not _planted_ran(tmp_path)
    assert f"refusing {open_dir}: other users can write to it (mode 0777)" in built.reason, built.reason

    monkeypatch.setattr(native.load, "kept", None)
    open_dir.chmod(0o700)
    library = next(open_dir.glob("hotloop-*.so"))
    library.chmod(0o666)
    built = native.load()
    assert built.library is None and not _planted_ran(tmp_path)
    assert f"refusing {library}: other users can write to it (mode 0666)" in built.reason, built.reason


@pytest.mark.skipif(native.ucx_prefix() is None, reason="no UCX headers (the libucx wheel)")
def test_a_lock_that_is_a_symlink_is_not_followed(
    victim: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / ".build.lock").symlink_to(victim)
    monkeypatch.setenv("RDMABENCH_CACHE_DIR", str(cache))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    built = native.load()
    assert victim.read_bytes() == PRECIOUS
    assert built.library is None
    assert f"refusing {cache / '.build.lock'}: it is a symbolic link" in built.reason, built.reason


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A first-use build into a cache directory of our own (0700), with the system's cc."""
    monkeypatch.setattr(native.load, "kept", None)
    for name, value in (("RDMABENCH_NATIVE", "build"), ("CC", "cc"), ("RDMABENCH_CACHE_DIR", str(tmp_path / "cache"))):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    (tmp_path / "cache").mkdir(mode=0o700)
    return tmp_path / "cache"


@pytest.mark.skipif(native.ucx_prefix() is None, reason="no UCX headers (the libucx wheel)")
@pytest.mark.parametrize("stale", ["empty", "a symbol missing"])
def test_a_stale_cached_library_is_rebuilt_and_named_by_its_file(own_cache: Path, tmp_path: Path, stale: str) -> None:
    """A zero-byte copy (a full disk) and an older build that lacks a symbol: both failed every run
    (naming /proc/self/fd/N); they are rebuilt in place, and the note names the file."""
    library = own_cache / _library_name()
    if stale == "empty":
        library.write_bytes(b"")
    else:
        (tmp_path / "old.c").write_text("void rb_init(void *check) { (void)check; }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(tmp_path / "old.c")], check=True)
    library.chmod(0o700)
    built = native.load()
    assert built.library is not None, built.reason
    assert f"{library}" in built.reason and ": rebuilt" in built.reason, built.reason
    assert "/proc/self/fd" not in built.reason
    assert library.read_bytes()[:4] == b"\x7fELF" and library.stat().st_size > 10_000


@pytest.mark.skipif(native.ucx_prefix() is None, reason="no UCX headers (the libucx wheel)")
def test_a_fifo_at_the_build_lock_is_refused_not_waited_on(own_cache: Path, tmp_path: Path) -> None:
    """Opened to write, a FIFO waits for a reader forever: every first build hung."""
    os.mkfifo(own_cache / ".build.lock", 0o600)
    code = "from rdmabench.wire import native; print(native.load().reason)"
    env = rdmabench_env(PYTHONPATH=str(REPO), TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"refusing {own_cache / '.build.lock'}: it is not a regular file" in proc.stdout, proc.stdout


@pytest.mark.skipif(native.ucx_prefix() is None, reason="no UCX headers (the libucx wheel)")
def test_the_loader_falls_back_past_a_neighbours_directory_to_one_of_ours(
    neighbour: str, shared: Path, planted_source: Path, victim: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RDMABENCH_CACHE_DIR names a directory in /tmp that the neighbour made first: the loader goes on to
    $XDG_RUNTIME_DIR and builds the loop there, saying what it refused."""
    taken = shared / "rdmabench-cache"
    as_neighbour(neighbour, f"mkdir -m 0755 {taken}; cp {planted_source} {taken / _library_name()}")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("RDMABENCH_CACHE_DIR", str(taken))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("CC", "cc")
    built = native.load()
    assert built.library is not None, built.reason
    assert str(runtime / "rdmabench" / _library_name()) in built.reason
    assert f"refusing {taken}: it belongs to user {neighbour}" in built.reason
    assert not _planted_ran(tmp_path)
    assert (runtime / "rdmabench").stat().st_mode & 0o777 == 0o700


def test_an_install_time_library_planted_in_the_current_directory_is_not_loaded(
    neighbour: str, shared: Path, planted_source: Path, tmp_path: Path
) -> None:
    """`python -m rdmabench` run from /tmp puts /tmp on sys.path, where the loader looks for an
    installed copy's library: the neighbour plants rdmabench/wire/native/_hotloop.so there."""
    folder = shared / "rdmabench" / "wire" / "native"
    as_neighbour(neighbour, f"mkdir -p {folder}; cp {planted_source} {folder / '_hotloop.planted.so'}")
    code = "from rdmabench.wire import native; print(native.load().reason)"
    env = rdmabench_env(PYTHONPATH=str(REPO), RB_PLANTED_MARK=str(tmp_path / "planted-library-ran"))
    env.pop("RDMABENCH_NATIVE", None)
    proc = subprocess.run([sys.executable, "-c", code], cwd=shared, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not _planted_ran(tmp_path)
    assert f"refusing {folder}: it belongs to user {neighbour}" in proc.stdout, proc.stdout


def test_storage_writes_never_go_through_a_planted_link(neighbour: str, shared: Path, tmp_path: Path) -> None:
    """The write tests' file used to be FILE.rdmabench-write, beside FILE: in /tmp, a link the
    neighbour planted there to one of the victim's files was filled, truncated, then removed."""
    precious = tmp_path / "precious"
    precious.write_bytes(PRECIOUS)
    data = shared / "data"
    planted = shared / "data.rdmabench-write"
    as_neighbour(neighbour, f"ln -s {precious} {planted}")
    out = tmp_path / "r.json"
    command = ["storage", str(data), "--size", "1MiB", "--test", "write", "--paths", "pageable"]
    proc = run_cli([*command, "--memory", "host", "--sizes", "1MiB", "--samples", "1", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert precious.read_bytes() == PRECIOUS
    assert planted.is_symlink()  # not ours: left alone
    assert sorted(p.name for p in shared.iterdir()) == ["data.rdmabench-write"]  # and nothing of ours left


def test_a_ucx_log_directory_of_another_user_is_refused_in_one_line(
    neighbour: str, shared: Path, tmp_path: Path
) -> None:
    """UCX names its logs by host and pid, which anyone can predict: RDMABENCH_UCX_LOG_DIR must be ours."""
    logs = shared / "ucx-logs"
    as_neighbour(neighbour, f"mkdir -m 0777 {logs}")
    out = tmp_path / "r.json"
    env = rdmabench_env(RDMABENCH_UCX_LOG_DIR=str(logs))
    proc = run_cli(["run", "--np", "2", "--sizes", "8", "-o", str(out)], env=env, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert f"refusing {logs}: it belongs to user {neighbour}" in lines[0]
    assert list(logs.iterdir()) == []


def test_private_files_are_opened_without_following_links_and_checked(tmp_path: Path) -> None:
    folder = privatedirs.private_dir(tmp_path / "mine")
    assert folder.stat().st_mode & 0o777 == 0o700
    target = tmp_path / "precious"
    target.write_bytes(PRECIOUS)
    (folder / "link").symlink_to(target)
    with pytest.raises(UnsafePathError, match="it is a symbolic link"):
        with privatedirs.locked(folder / "link"):
            pass
    assert target.read_bytes() == PRECIOUS
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked-dir").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError, match="it is a symbolic link"):
        privatedirs.private_dir(tmp_path / "linked-dir")
    with privatedirs.locked(folder / "lock"):
        assert (folder / "lock").stat().st_mode & 0o777 == 0o600


def test_stale_scratch_directories_of_dead_processes_are_swept(tmp_path: Path) -> None:
    """Only ours, of this host, whose creating process is gone."""
    make = "import sys; from rdmabench import privatedirs; print(privatedirs.scratch_dir('rb-x-', sys.argv[1]))"
    dead = Path(
        subprocess.run(
            [sys.executable, "-c", make, str(tmp_path)], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    alive = privatedirs.scratch_dir("rb-x-", tmp_path)
    pid, ours = dead.name.split("@")[0].removeprefix("rb-x-"), privatedirs._namespace()
    host, (inode, boot) = privatedirs._host(), ours.split(".")
    assert (dead / privatedirs.OWNER_MARK).read_text() == f"{pid} {inode}.{boot}\n"
    # Kept: another host's; another pid namespace's (its pid means nothing here); unmarked, or
    # marked for another pid. Swept: an earlier boot's (its process is gone).
    kept = {"elsewhere": f"{pid} {ours}", "ns": f"{pid} 1.{boot}", "unmarked": None, "otherpid": f"1{pid} {ours}"}
    swept = {"boot": f"{pid} {inode}.00000000"}
    for label, mark in (kept | swept).items():
        folder = tmp_path / f"rb-x-{pid}@{'another-host' if label == 'elsewhere' else host}-{label}"
        folder.mkdir(mode=0o700)
        if mark is not None:
            (folder / privatedirs.OWNER_MARK).write_text(mark + "\n")
    privatedirs.sweep_stale("rb-x-", tmp_path)
    left = sorted(p.name.rpartition("-")[2] for p in tmp_path.iterdir() if p != alive)
    assert alive.is_dir() and left == sorted(kept) and not dead.exists()


_OWNER_IN_A_NEW_NAMESPACE = """
import os, sys, time
from rdmabench import privatedirs
dead_here = set(map(int, sys.argv[2].split(",")))
while True:  # fork until a child's pid here is one that no process has in the namespace outside
    pid = os.fork()
    if pid == 0:
        if os.getpid() in dead_here:
            print(privatedirs.scratch_dir("rb-ns-", sys.argv[1]), flush=True)
            time.sleep(120)
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_a_live_jobs_directory_in_another_pid_namespace_is_never_swept(tmp_path: Path) -> None:
    """Containers share /tmp, /dev/shm and the host name, not pids: a live job's directory, named
    for a pid that is dead in our namespace, is left alone (it was removed, and the job broke)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a second pid namespace needs root and unshare")
    dead_here = [str(n) for n in range(100, 4000) if not Path(f"/proc/{n}").exists()]
    owner = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
         sys.executable, "-c", _OWNER_IN_A_NEW_NAMESPACE, str(tmp_path), ",".join(dead_here)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert owner.stdout is not None
        live = Path(owner.stdout.readline().strip())
        assert live.parent == tmp_path, owner.stderr.read() if owner.stderr else ""
        pid = int(live.name.removeprefix("rb-ns-").split("@")[0])
        assert not Path(f"/proc/{pid}").exists()  # dead here, alive there
        privatedirs.sweep_stale("rb-ns-", tmp_path)
        assert live.is_dir()
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _ranks_writing(output: Path) -> list[int]:
    """The pids of the ranks of the job writing `output`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        arguments = command.split(b"\0")
        if b"rdmabench.job.rank" in arguments[1:5] and str(output).encode() in command:
            found.append(int(entry.name))
    return found


def _wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_a_launcher_killed_outright_leaves_no_ranks_segments_or_directories(tmp_path: Path) -> None:
    """kill -9 of the launcher's whole process group in the middle of a run: Open MPI's ranks sit in
    process groups of their own; they stop, and the job's directories in the temporary directory
    and under /dev/shm (where Open MPI's shared-memory segments now go) go with them."""
    scratch, output = tmp_path / "tmp", tmp_path / "r.json"
    scratch.mkdir()
    command = ["run", "--np", "2", "--sizes", "8", "--samples", "10000", "--sample-time", "0.05", "-o", str(output)]
    launcher = subprocess.Popen(
        [sys.executable, "-m", "rdmabench", *command],
        env=rdmabench_env(TMPDIR=str(scratch)),
        cwd=REPO,
        start_new_session=True,
        stdout=(tmp_path / "stdout").open("w"),
        stderr=(tmp_path / "stderr").open("w"),
    )
    ranks: list[int] = []
    try:

        def measuring() -> bool:  # MPI is up: rank 0 has printed the table's header
            ranks[:] = _ranks_writing(output)
            return len(ranks) == 2 and "median" in (tmp_path / "stdout").read_text()

        assert _wait_for(measuring, 90), (tmp_path / "stderr").read_text()
        segments = list(Path("/dev/shm").glob(f"rdmabench-run-{launcher.pid}@*/sm_segment.*"))
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        assert _wait_for(lambda: not any(_running(pid) for pid in ranks), 30), "the ranks run on"
        assert _wait_for(lambda: not list(scratch.iterdir()), 30), list(scratch.rglob("*"))
        assert len(segments) == 2  # Open MPI's segments were in the job's own directory under /dev/shm...
        assert not list(Path("/dev/shm").glob(f"rdmabench-run-{launcher.pid}@*"))  # ...which is gone
    finally:
        for pid in ranks:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_user_that_owns_a_path_is_named(tmp_path: Path) -> None:
    me = pwd.getpwuid(os.geteuid()).pw_name
    reason = privatedirs.why_not_trusted(os.lstat(tmp_path), directory=True, owners=frozenset({os.geteuid() + 1}))
    assert reason == f"it belongs to user {me} (uid {os.geteuid()}), not to you"


def test_a_results_folder_another_user_planted_is_never_followed(neighbour: str, shared: Path) -> None:
    """No -o, run from a shared folder where the neighbour made `results/` (writable by all, or a
    link to a folder of theirs): one line, exit 2, nothing written there."""
    theirs = shared / "theirs"
    for plant in (
        f"mkdir -m 0777 {shared / 'results'}",
        f"mkdir -m 0777 {theirs}; ln -s {theirs} {shared / 'results'}",
    ):
        as_neighbour(neighbour, f"rm -rf {shared / 'results'} {theirs}; {plant}")
        proc = run_cli(["run", "--np", "2", "--sizes", "8", "--samples", "1"], cwd=shared)
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert f"refusing the results folder {shared / 'results'}: " in lines[0] and "give -o PATH" in lines[0]
        assert not list((shared / "results").iterdir())


def _python_for(user: str) -> list[str] | None:
    """A Python the user can run with this one's packages and this tree (this interpreter may sit
    in root's home), or None."""
    import site
    import sysconfig

    path = os.pathsep.join([str(REPO), *site.getsitepackages(), sysconfig.get_paths()["purelib"]])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, shutil.which(version) or "", f"/usr/bin/{version}"):
        probe = [
            "runuser",
            "-u",
            user,
            "--",
            "env",
            f"PYTHONPATH={path}",
            python,
            "-c",
            "import click, numpy, rdmabench",
        ]
        if python and subprocess.run(probe, capture_output=True, cwd="/", timeout=60).returncode == 0:
            return ["runuser", "-u", user, "--", "env", f"PYTHONPATH={path}", python]
    return None


def test_a_user_who_cannot_write_the_working_folder_gets_one_line(neighbour: str, tmp_path: Path) -> None:
    """No -o in a folder the user cannot write: one line naming it (it was a PermissionError's traceback)."""
    python = _python_for(neighbour)
    if python is None:
        pytest.skip("no Python here that the second user can run")
    tmp_path.chmod(0o755)  # root's: the neighbour may enter, not create
    code = "from rdmabench.cli import main; main()"
    proc = subprocess.run(
        [*python, "-c", code, "run", "--np", "2", "--sizes", "8", "--samples", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert (
        lines[0]
        == f"rdmabench: error: cannot make the results folder results/ in {tmp_path}: Permission denied; give -o PATH"
    )
