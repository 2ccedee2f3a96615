"""Bad input gets one clear line on stderr and a non-zero exit: no traceback, no hang, no lost file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import rdmabench_env, run_cli, run_cli_here

# Refusals the ranks make once started (of the hosts they run on, the NICs and memory they find).
BY_THE_RANKS = ("its 2 ranks are all on", "no such active RDMA port", "more than --max-pinned")


def _one_line_error(args: list[str], expected: str, code: int | None = None, **kwargs: object) -> str:
    """The CLI's own refusal is checked in this process; one with an environment of its own (`env=`),
    or that the ranks make, in a process of its own, as the command runs."""
    if kwargs or any(words in expected for words in BY_THE_RANKS):
        proc = run_cli(args, timeout=120, **kwargs)  # type: ignore[arg-type]
    else:
        proc = run_cli_here(args)
    assert proc.returncode != 0
    if code is not None:
        assert proc.returncode == code
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rdmabench: error:") and expected in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--mode", "gpu"], "unknown memory mode 'gpu'"),
        (["run", "--src-mode", "hbm"], "unknown memory mode 'hbm'"),
        (["run", "--test", "alltoall"], "unknown test 'alltoall'"),
        (["run", "--sizes", "0"], "at least 1 byte"),
        (["run", "--sizes", "-8"], "bad size '-8'"),
        (["run", "--sizes", "1.5MiB"], "bad size '1.5MiB'"),
        (["run", "--sizes", "64:8"], "larger than"),
        (["run", "--sizes", "1TiB"], "unknown suffix"),
        (["run", "--np", "1"], "--np must be at least 2"),
        (["run", "--window", "0"], "--window must be between 1 and"),
        (["run", "--iters", "-3"], "--iters must be between"),
        (["run", "--iters", "100000000000"], "--iters must be between"),
        (["run", "--samples", "0"], "--samples must be between"),
        (["run", "--sample-time", "0"], "--sample-time must be above 0"),
        (["run", "--timeout", "-1"], "--timeout must be above 0"),
        (["run", "--format", "xml"], "unknown format 'xml'"),
        (["run", "--units", "MB/s"], "unknown units 'MB/s'"),
        (["run", "--mode", "staged", "--chunk-size", "0"], "--chunk-size: bad size '0'"),
        (["run", "--mode", "staged", "--chunk-size", "1x"], "--chunk-size: bad size '1x'"),
        (["run", "--max-pinned", "lots"], "--max-pinned: bad size 'lots'"),
        (["run", "--mode", "staged", "--stage-buffers", "0"], "--stage-buffers must be at least 1"),
        (["run", "--pattern", "screen", "--remeasure-below", "1.5"], "--remeasure-below is a share of the class"),
        (["run", "--np", "2", "--pattern", "screen"], "--pattern screen checks a cluster: its 2 ranks are all on"),
        (["run", "--np", "4", "--pattern", "screen", "--test", "lat"], "--test lat measures one link at a time"),
        (["run", "--nics", ","], "--nics takes device names separated by commas"),
        (["run", "--one-buffer"], "so none can be checked: add --no-validate"),
        (["run", "--one-buffer", "--no-validate", "--test", "lat"], "--one-buffer shapes the window of bw and bibw"),
        (["run", "--one-buffer", "--no-validate", "--mode", "staged"], "--one-buffer cannot use staged memory"),
        (["run", "--nics", "nosuch9", "--sizes", "8"], "--nics nosuch9: no such active RDMA port or interface"),
    ],
)
def test_bad_options(args: list[str], expected: str) -> None:
    _one_line_error(args, expected, code=2)


def test_unwritable_output() -> None:
    _one_line_error(["run", "-o", "/proc/nope/r.json"], "cannot write results to /proc/nope/r.json")


def test_device_mode_without_gpu() -> None:
    from rdmabench.hardware.gpu import visible_gpu_count

    if visible_gpu_count():
        pytest.skip("this machine has a GPU")
    for mode in ("device", "managed", "mapped", "staged", "bounce"):
        _one_line_error(["run", "--mode", mode], f"{mode} memory needs a GPU:", code=2)
    _one_line_error(["run", "--dst-mode", "staged"], "staged memory needs a GPU:", code=2)


def test_existing_output_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "precious.json"
    path.write_text("{}")
    _one_line_error(["run", "-o", str(path)], "already exists", code=2)
    assert path.read_text() == "{}"


def test_np_inside_a_launched_job() -> None:
    env = rdmabench_env(OMPI_COMM_WORLD_SIZE="2")
    _one_line_error(["run", "--np", "2"], "leave it out under mpirun or srun", env=env)


def test_missing_mpiexec(tmp_path: Path) -> None:
    """A variable the user set that names no executable is bad input: 2, as any other (it was 1)."""
    env = rdmabench_env(RDMABENCH_MPIEXEC=str(tmp_path / "no-such-mpiexec"))
    _one_line_error(["run", "--sizes", "8", "-o", str(tmp_path / "r.json")], "is not an executable", code=2, env=env)


@pytest.mark.parametrize(("where", "says"), [("/etc/passwd", "it is not a directory"), ("/tmp", "other users can")])
def test_a_ucx_log_dir_that_is_no_directory_of_the_users_is_bad_input(tmp_path: Path, where: str, says: str) -> None:
    """RDMABENCH_UCX_LOG_DIR=/etc/passwd exited 1 where other bad input exits 2."""
    env = rdmabench_env(RDMABENCH_UCX_LOG_DIR=where)
    args = ["run", "--np", "2", "--sizes", "8", "-o", str(tmp_path / "r.json")]
    line = _one_line_error(args, f"RDMABENCH_UCX_LOG_DIR: refusing {where}: {says}", code=2, env=env)
    assert "Traceback" not in line


def test_help_lists_every_option() -> None:
    proc = run_cli_here(["run", "--help"])
    assert proc.returncode == 0
    for option in [
        "--np",
        "--mode",
        "--src-mode",
        "--dst-mode",
        "--test",
        "--sizes",
        "--window",
        "--iters",
        "--warmup",
        "--no-validate",
        "--chunk-size",
        "--stage-buffers",
        "--output",
        "--format",
        "--remeasure-below",
        "--progress",
    ]:
        assert option in proc.stdout


def test_max_pinned_cap_is_checked_before_any_transfer(tmp_path: Path) -> None:
    _one_line_error(
        ["run", "--mode", "pinned", "--sizes", "4MiB", "--max-pinned", "1MiB", "-o", str(tmp_path / "r.json")],
        "more than --max-pinned 1MiB",
        code=2,
    )


@pytest.mark.parametrize(
    "noise",
    [
        "[n1:77] PMIX ERROR: PMIX_ERR_UNREACH in file pmix_server.c at line 3146\n",
        "[warn] Epoll MOD(4) on fd 21 failed. Old events were 6; read change was 2 (del); write change was 0 "
        "(none); close change was 0 (none): Bad file descriptor\n",
    ],
)
def test_launcher_noise_after_an_error_is_held_back(noise: str) -> None:
    import io

    from rdmabench.job.spawner import StderrRelay

    said = "rdmabench: error: --engine native on rank 0 (n1): cannot build the native loop\n"
    sink = io.StringIO()
    StderrRelay(io.StringIO(said + noise), sink).run()
    assert sink.getvalue() == said
    sink = io.StringIO()
    StderrRelay(io.StringIO(noise), sink).run()  # with nothing else said, the launcher's line stays
    assert sink.getvalue() == noise


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--bogus"], "No such option '--bogus'"),
        (["run", "--np", "x"], "'x' is not a valid integer"),
        (["nosuchcommand"], "No such command 'nosuchcommand'"),
        (["report"], "Missing argument"),
        (["report", "--since", "garbage", "x.json"], "--since wants a date (YYYY-MM-DD)"),
        (["report", "--until", "2026-13-45", "x.json"], "--until wants a date"),
        (["run", "--chunk-size", "1MiB"], "--chunk-size and --stage-buffers shape staged and bounce modes"),
        (["run", "-b", "8", "--sizes", "8,16"], "give the sizes once"),
        (["run", "-f", "1", "-b", "8"], "-f/--step-factor must be at least 2"),
    ],
)
def test_usage_errors_are_one_line_too(args: list[str], expected: str) -> None:
    """click's own usage errors (unknown option, bad value, missing argument) included: no Usage: block."""
    line = _one_line_error(args, expected, code=2)
    assert "Usage:" not in line


def test_nccl_tests_size_range_and_counts(tmp_path: Path) -> None:
    from rdmabench.results.files.document import load

    out = tmp_path / "r.json"
    proc = run_cli(["run", "-b", "8", "-e", "512", "-f", "8", "-n", "3", "-w", "1", "--samples", "2", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    entries = load(str(out))["results"]
    assert [e["size_bytes"] for e in entries] == [8, 64, 512]
    assert {(e["iterations"], e["warmup"]) for e in entries} == {(3, 1)}


def test_a_transport_setting_ucx_cannot_use_is_named(tmp_path: Path) -> None:
    env = rdmabench_env(UCX_TLS="bogus")
    line = _one_line_error(["run", "--sizes", "8", "-o", str(tmp_path / "r.json")], "UCX could not start", env=env)
    assert "UCX_TLS=bogus" in line
    doctor = run_cli(["doctor"], env=env)
    assert "UCX_TLS=bogus names bogus, not a transport of this UCX: UCX will not start" in doctor.stdout


def test_nics_and_ucx_net_devices_are_not_both_given() -> None:
    env = rdmabench_env(UCX_NET_DEVICES="lo")
    _one_line_error(["run", "--nics", "lo", "--sizes", "8"], "--nics and UCX_NET_DEVICES=lo both choose", env=env)


def test_an_odd_bisection_names_the_idle_rank(tmp_path: Path) -> None:
    args = ["--np", "3", "--pattern", "bisection", "--sizes", "8", "--samples", "1", "-o", str(tmp_path / "r.json")]
    proc = run_cli(["run", *args])
    assert proc.returncode == 0, proc.stderr
    assert "rank 2 stays idle: bisection pairs the two halves of an even count" in proc.stdout


def test_a_launcher_box_glued_to_an_error_line_is_still_held_back() -> None:
    """Under load the launcher's MPI_ABORT box can start before the rank's error line has its newline
    (seen: a full disk's line ending '... kept in it-----'): still one line out, and the box held back."""
    import io

    from rdmabench.job.spawner import StderrRelay

    said = "rdmabench: error: failed on rank 0 (vm): cannot write the results stream r.json.partial: kept in it"
    edge = "-" * 74 + "\n"
    box = "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nErrorcode: 1\n"
    second = 'prterun has exited due to process rank 0 with PID 0 on node vm calling\n"abort".\n'
    sink = io.StringIO()
    StderrRelay(io.StringIO(said + edge + box + edge + " \n" + edge + second + edge + "\n"), sink).run()
    assert sink.getvalue() == said + "\n"


@pytest.mark.parametrize(("given", "expected"), [(None, "^ofi"), ("self,vader,tcp", "self,vader,tcp")])
def test_local_open_mpi_ranks_leave_libfabric_out_unless_told(
    given: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local ranks talk over shared memory: Open MPI's libfabric transport (a second's sleep in each
    rank's MPI_Init here) is left out of a local job, unless the caller chose the transports."""
    from rdmabench.job import spawner
    from rdmabench.job.config import RunConfig

    if spawner.mpiexec_flavor(spawner.find_mpiexec()) != "openmpi":
        pytest.skip("the local launcher here is not Open MPI's")
    if given is None:
        monkeypatch.delenv("OMPI_MCA_btl", raising=False)
    else:
        monkeypatch.setenv("OMPI_MCA_btl", given)
    _command, env = spawner.local_command(2, RunConfig())
    assert env["OMPI_MCA_btl"] == expected


def test_a_parameter_file_that_chooses_the_transports_is_left_to_choose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`btl = ...` in a parameter file the launch reads: the environment would override it, so the
    local job sets no OMPI_MCA_btl of its own."""
    from rdmabench.job import spawner
    from rdmabench.job.config import RunConfig

    if spawner.mpiexec_flavor(spawner.find_mpiexec()) != "openmpi":
        pytest.skip("the local launcher here is not Open MPI's")
    monkeypatch.delenv("OMPI_MCA_btl", raising=False)
    params = tmp_path / "params.conf"
    params.write_text("# mine\n  btl = self,vader\n")
    monkeypatch.setenv("OMPI_MCA_mca_param_files", str(params))
    assert "OMPI_MCA_btl" not in spawner.local_command(2, RunConfig())[1]
    params.write_text("btl_tcp_if_include = lo\n")  # another parameter: not a choice of transports
    assert spawner.local_command(2, RunConfig())[1]["OMPI_MCA_btl"] == "^ofi"
    params.unlink()
    os.mkfifo(params)  # not a file to read (an open would wait for a writer): left to Open MPI, unread
    assert spawner.btl_in_param_files(spawner.find_mpiexec(), {"OMPI_MCA_mca_param_files": str(params)})


def test_a_command_run_in_the_tests_process_leaves_it_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_cli_here sets back what a command may change of its process (a process of its own takes it
    away when it exits): the environment, the working folder and the signal handlers, here changed by a
    command stood in for the CLI."""
    import signal

    from rdmabench import cli

    before = (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGTERM))

    def changes_everything(prog_name: str) -> None:
        os.environ["RDMABENCH_LEFT_BEHIND"] = "1"
        os.chdir("/")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(3)

    monkeypatch.setattr(cli, "main", changes_everything)
    assert run_cli_here(["--version"]).returncode == 3
    assert (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGTERM)) == before
