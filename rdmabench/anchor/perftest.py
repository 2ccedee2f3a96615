"""ucx_perftest, the C anchor: where the libucx wheel keeps it, how to run a server/client pair of
it on this machine under rdmabench's UCX settings, how to read its final line, and the bracket a
comparison takes of it (a run just before rdmabench's and one just after)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass

from ..errors import LaunchError
from ..hardware.gpu import visible_gpu_count
from ..units import format_size

# ucx_perftest labels its bandwidth columns MB/s but computes them in MiB/s (2**20 bytes).
_PERFTEST_MB = 1 << 20
_FINAL_RE = re.compile(r"^Final:\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


@dataclass(frozen=True)
class PerftestResult:
    latency_us: float  # overall average; for tag_lat this is half a round trip
    bandwidth_gbps: float  # 1e9 bytes/s, converted from perftest's MiB/s
    message_rate: float  # messages per second, overall


def perftest_paths() -> tuple[str, str]:
    """The ucx_perftest binary of the libucx wheel that UCXX loads, and its library directory."""
    try:
        import libucx
    except ImportError:
        raise LaunchError("the libucx wheel (which carries ucx_perftest) is not installed") from None
    root = os.path.dirname(libucx.__file__)
    binary = os.path.join(root, "bin", "ucx_perftest")
    if not os.access(binary, os.X_OK):
        raise LaunchError(f"no ucx_perftest at {binary}")
    return binary, os.path.join(root, "lib")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def parse_final(text: str) -> PerftestResult:
    for line in text.splitlines():
        match = _FINAL_RE.match(line.strip())
        if match:
            fields = [float(v) for v in match.groups()]
            return PerftestResult(
                latency_us=fields[3],
                bandwidth_gbps=fields[5] * _PERFTEST_MB / 1e9,
                message_rate=fields[7],
            )
    raise LaunchError(f"ucx_perftest printed no Final line:\n{text[-2000:]}")


def same_ucx_settings() -> dict[str, str]:
    """Put in this process's environment the UCX settings rdmabench's ranks run with, so that
    ucx_perftest runs under them too: importing UCXX sets some (UCX_RNDV_THRESH=8192 among them),
    and a different rendezvous threshold would compare two protocols instead of two programs.
    Returns the ones UCXX set."""
    from ..wire import ucx_env
    from ..wire.mpi import import_ucx_first

    import_ucx_first()
    return ucx_env.set_by_ucxx()


def run_perftest(test: str, size: int, device: bool, iterations: int, timeout: float = 120) -> PerftestResult:
    """One ucx_perftest server/client pair on this machine; GPUs 0 and 1 for device memory. Call
    same_ucx_settings() first."""
    binary, libdir = perftest_paths()
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    for key in ("UCX_PROTO_INFO", "UCX_LOG_FILE"):
        env.pop(key, None)
    port = _free_port()
    common = ["-t", test, "-s", str(size), "-n", str(iterations), "-w", str(max(10, iterations // 10)), "-p", str(port)]
    if device:
        common += ["-m", "cuda"]
    server_env, client_env = dict(env), dict(env)
    if device:
        # GPUs 0 and 1 where there are two (rdmabench's two ranks take one each), else both on GPU 0.
        server_env["CUDA_VISIBLE_DEVICES"], client_env["CUDA_VISIBLE_DEVICES"] = (
            ("1" if visible_gpu_count() >= 2 else "0"),
            "0",
        )
    server = subprocess.Popen([binary, *common], env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _attempt in range(20):
            time.sleep(0.25)
            try:
                client = subprocess.run(
                    [binary, "127.0.0.1", *common], env=client_env, capture_output=True, text=True, timeout=timeout
                )
            except subprocess.TimeoutExpired:
                raise LaunchError(
                    f"ucx_perftest {test} {format_size(size)} did not finish in {timeout:.0f} s"
                ) from None
            if client.returncode == 0:
                return parse_final(client.stdout)
        raise LaunchError(f"ucx_perftest client failed: {client.stderr.strip()[-500:]}")
    finally:
        server.kill()  # its server does not always exit after a test (seen on the GPU node)
        server.wait()


def perftest_iterations(test: str, size: int) -> int:
    if test.endswith("_lat"):
        return 20000 if size <= 65536 else max(50, (256 << 20) // size)
    # One-sided gets of device memory may be emulated (UCX 1.21: over shared memory, well under a
    # million small messages a second): a smaller count keeps the anchor within its time limit.
    most = 1_000_000 if test.startswith("tag") else 100_000
    return max(50, min(most, (4 << 30) // size))


def perftests(test: str, sizes: list[int], device: bool) -> dict[int, PerftestResult]:
    """One ucx_perftest run of `test` per size, in order."""
    return {size: run_perftest(test, size, device, perftest_iterations(test, size)) for size in sizes}


@dataclass(frozen=True)
class Bracket:
    """ucx_perftest's figure for one size taken just before and just after rdmabench ran it: the
    anchor is their mean, and their difference says whether the machine held still in between."""

    before: PerftestResult
    after: PerftestResult

    def pair(self, latency: bool) -> tuple[float, float]:
        """The two runs' figures, before and after: latency in us, or bandwidth in GB/s."""
        if latency:
            return self.before.latency_us, self.after.latency_us
        return self.before.bandwidth_gbps, self.after.bandwidth_gbps

    def mean(self, latency: bool) -> float:
        """The anchor: the mean of the two runs' figures."""
        return sum(self.pair(latency)) / 2

    def drift(self, latency: bool) -> float:
        """How far apart the two runs were, relative to their mean (0: the machine held still)."""
        first, second = self.pair(latency)
        return abs(second - first) / max((first + second) / 2, 1e-12)

    @property
    def message_rate(self) -> float:
        return (self.before.message_rate + self.after.message_rate) / 2
