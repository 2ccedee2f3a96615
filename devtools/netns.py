"""A namespace cluster (launch/netns-cluster.sh) with one fault planted in it: what the namespace
trials of `devtools.diagnose --netns` and the tests run a screen on.

Every host's interfaces get a line rate (an HTB class on each `eth<r>` and on `lo` inside its
namespace), set below what the links reach unpaced, so that a link is limited by its "wire", as in
a fleet, and not by the cores the namespaces share (unpaced, a screen's loaded links spread by
10-30% with the load of the machine; paced, by 3-5%). A fault then paces part of the network to a
share of the rate the paced links really carry (`pace`'s `natural_bits`):

- `host`: every rail of one host, on its way out (`send`: its namespace's `eth<r>`), in (`receive`:
  the bridge side of its veth, `<prefix>-v<i>-<r>`), or both;
- `nic`: one rail of one host, one way;
- `pair`: the path between two hosts, both ways: what each sends to the other, on every rail, goes
  through an HTB class of its own at the slow rate (netem, which would delay or pace it the same
  way, is not in every kernel: not in this machine's);
- `cpu`: one host's ranks pinned to one core with busy processes beside them (bounded: they stop
  on their own after `timeout` seconds and are killed when the run ends);
- `none`.

Traffic stays inside the namespaces: the ranks talk over the 10.213.x.y addresses the script gives
them (UCX_TLS=tcp,self; `--nics eth0,eth1`), and Open MPI's own traffic is held to rail 0's subnet.
A cluster's subnets (10.213.<subnet + r>.0/24) must be no other cluster's: `up` refuses otherwise.
Needs root, `ip`, `tc`, `taskset` and Open MPI. `cluster.down()` removes the namespaces, their veths
and bridges (and with them every queueing discipline planted on them).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rdmabench.errors import ConfigError, LaunchError
from rdmabench.pystart import python_code, python_module
from rdmabench.units import is_digits

SCRIPT = Path(__file__).resolve().parents[1] / "launch" / "netns-cluster.sh"
DIRECTIONS = {"host": ("send", "receive", "both"), "nic": ("send", "receive"), "pair": ("both",)}
QUANTUM = 65536  # bytes an HTB class sends per turn (its default, rate / 10, is above what HTB allows)


@dataclass(frozen=True)
class Planted:
    """One fault in a namespace cluster: `kind` in host, nic, pair, cpu, none; `factor` the share of
    the line rate the paced part keeps (a CPU fault: the busy processes beside the host's ranks)."""

    kind: str
    host: int = 0
    rail: int = 0  # a NIC fault's rail
    direction: str = "send"
    peer: int = 0  # a pair's other host
    factor: float = 1.0
    busy: int = 0  # a CPU fault: busy processes beside the ranks
    quota: float = 0.0  # a CPU fault: the share of one core the ranks and the busy processes get together

    def component(self, prefix: str) -> str | None:
        """The planted part as a Suspect names it (attribution.Suspect.name); None: healthy."""
        host = f"{prefix}-h{self.host}"
        if self.kind == "host":
            return f"host {host} {self.direction}"
        if self.kind == "nic":
            return f"nic {host}:eth{self.rail} {self.direction}"
        if self.kind == "pair":
            low, high = sorted((host, f"{prefix}-h{self.peer}"))
            return f"pair {low} <-> {high}"
        if self.kind == "cpu":
            return f"host {host}"  # contention has no direction of its own: the host, either way
        return None

    def named_by(self, suspect: str | None, prefix: str) -> bool:
        """Whether a suspect's name (attribution.Suspect.name; None: no suspect) is this fault's part:
        the same part and direction; for a CPU fault, the host in any direction."""
        planted = self.component(prefix)
        if planted is None or suspect is None:
            return planted == suspect
        return suspect.startswith(planted + " ") if self.kind == "cpu" else suspect == planted

    def drained(self, prefix: str) -> list[str]:
        """The hosts a drain list should name: the one holding the part (none for a path between two)."""
        return [f"{prefix}-h{self.host}"] if self.kind in ("host", "nic", "cpu") else []

    def describe(self) -> str:
        if self.kind == "none":
            return "none"
        if self.kind == "cpu":
            return f"cpu h{self.host} ({self.quota:.0%} of a core, {self.busy} busy)"
        where = {"host": f"h{self.host}", "nic": f"h{self.host} eth{self.rail}", "pair": f"h{self.host}<->h{self.peer}"}
        way = "" if self.kind == "pair" else f" {self.direction}"
        return f"{self.kind} {where[self.kind]}{way} {self.factor:.0%}"


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise LaunchError(f"{what}: {' '.join(command)}: {done.stderr.strip() or done.returncode}")


def why_not() -> str | None:
    """Why this machine cannot hold a namespace cluster; None when it can."""
    if os.geteuid() != 0:
        return "network namespaces and tc need root"
    for tool in ("ip", "tc", "taskset", "unshare"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            return f"{tool} is not installed"
    if not SCRIPT.is_file():
        return f"{SCRIPT} is not here (run from a checkout of rdmabench)"
    return None


def other_cluster(subnet: int, rails: int) -> str | None:
    """A route of this namespace to one of the subnets 10.213.<subnet + r>.0/24: another namespace
    cluster holds them, and Open MPI's daemons could be reached on its bridge instead of ours."""
    for rail in range(rails):
        shown = subprocess.run(
            ["ip", "-o", "route", "show", f"10.213.{subnet + rail}.0/24"], capture_output=True, text=True
        )
        if shown.stdout.strip():
            return shown.stdout.strip()
    return None


class NamespaceCluster:
    """`hosts` namespaces of `rails` interfaces each (launch/netns-cluster.sh under `prefix`), rail r
    on 10.213.<subnet + r>.0/24."""

    def __init__(self, hosts: int, rails: int, prefix: str, subnet: int = 0, env: dict[str, str] | None = None):
        self.hosts, self.rails, self.prefix, self.subnet = hosts, rails, prefix, subnet
        self.env = dict(env or os.environ, RDMABENCH_NETNS_PREFIX=prefix, RDMABENCH_NETNS_SUBNET=str(subnet))
        self.built = False

    def namespace(self, host: int) -> str:
        return f"{self.prefix}-h{host}"

    def bridge_side(self, host: int, rail: int) -> str:
        """The veth end on the bridge: what leaves it enters the host."""
        return f"{self.prefix}-v{host}-{rail}"

    def address(self, host: int, rail: int) -> str:
        return f"10.213.{self.subnet + rail}.{host + 1}"

    def up(self) -> None:
        problem = other_cluster(self.subnet, self.rails)
        if problem:
            raise LaunchError(f"another namespace cluster is up (route {problem}): take it down first")
        self.built = True  # even half built, `down` removes what there is
        done = subprocess.run(
            [str(SCRIPT), "up", str(self.hosts), str(self.rails)], capture_output=True, text=True, env=self.env
        )
        if done.returncode != 0:
            raise LaunchError(f"could not build the namespaces: {done.stderr.strip()}")

    def down(self) -> None:
        """Stop whatever still runs in the namespaces (ours: started by this cluster), then remove them."""
        if not self.built:
            return
        for host in range(self.hosts):
            for pid in self.pids(host):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        subprocess.run([str(SCRIPT), "down", str(self.hosts)], capture_output=True, env=self.env, timeout=120)
        self.built = False

    def pids(self, host: int) -> list[int]:
        shown = subprocess.run(["ip", "netns", "pids", self.namespace(host)], capture_output=True, text=True)
        return [int(word) for word in shown.stdout.split() if is_digits(word)]

    # --- pacing -------------------------------------------------------------------------------------

    def _tc(self, host: int | None, *args: str) -> None:
        inside = ["ip", "netns", "exec", self.namespace(host)] if host is not None else []
        _run([*inside, "tc", *args], "tc")

    def _htb(self, host: int | None, device: str, bits: float) -> None:
        """A root HTB on `device` whose default class sends at `bits` per second."""
        self._tc(host, "qdisc", "replace", "dev", device, "root", "handle", "1:", "htb", "default", "10")
        rate = f"{int(bits)}bit"
        self._tc(host, "class", "replace", "dev", device, "parent", "1:", "classid", "1:10", "htb", "rate", rate)
        self._tc(host, "class", "change", "dev", device, "classid", "1:10", "htb", "rate", rate, "ceil", rate,
                 "quantum", str(QUANTUM))  # fmt: skip

    def clear(self) -> None:
        """No queueing discipline of ours anywhere: the kernel's defaults again."""
        for host in range(self.hosts):
            devices: list[tuple[int | None, str]] = [(host, "lo")]
            for rail in range(self.rails):
                devices += [(host, f"eth{rail}"), (None, self.bridge_side(host, rail))]
            for inside, device in devices:
                command = ["tc", "qdisc", "del", "dev", device, "root"]
                if inside is not None:
                    command = ["ip", "netns", "exec", self.namespace(inside), *command]
                subprocess.run(command, capture_output=True, timeout=60)  # none there: nothing to do

    def pace(self, line_bits: float, fault: Planted, natural_bits: float | None = None) -> None:
        """Every host's interfaces at `line_bits` per second on their way out, and `fault` planted:
        the paced part at `fault.factor` of `natural_bits`, what a link really carries on the wire
        under the line rate (loaded links reach less than the line: a part paced to 90% of the line
        ran at 93% of its class); the line rate where not given. A host's loopback too: two ranks of
        one host talk through it (their addresses are local), and unpaced it measures the shared
        cores, not a part (single links at 60% on a loaded machine)."""
        self.clear()
        slow = min(natural_bits or line_bits, line_bits) * fault.factor
        for host in range(self.hosts):
            self._htb(host, "lo", line_bits)
            for rail in range(self.rails):
                sends_slowly = fault.direction in ("send", "both") and (
                    (fault.kind == "host" and host == fault.host)
                    or (fault.kind == "nic" and host == fault.host and rail == fault.rail)
                )
                self._htb(host, f"eth{rail}", slow if sends_slowly else line_bits)
                receives_slowly = fault.direction in ("receive", "both") and (
                    (fault.kind == "host" and host == fault.host)
                    or (fault.kind == "nic" and host == fault.host and rail == fault.rail)
                )
                if receives_slowly:
                    self._htb(None, self.bridge_side(host, rail), slow)
        if fault.kind == "pair":
            for one, other in ((fault.host, fault.peer), (fault.peer, fault.host)):
                for rail in range(self.rails):
                    self._slow_path(one, other, rail, slow)

    def _slow_path(self, host: int, peer: int, rail: int, slow_bits: float) -> None:
        """What `host` sends to `peer` on `rail` goes through an HTB class of its own at `slow_bits`
        (netem's `rate` would do the same; this machine's kernel has no netem)."""
        device, rate = f"eth{rail}", f"{int(slow_bits)}bit"
        self._tc(host, "class", "replace", "dev", device, "parent", "1:", "classid", "1:20", "htb", "rate", rate,
                 "ceil", rate, "quantum", str(QUANTUM))  # fmt: skip
        self._tc(host, "filter", "replace", "dev", device, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                 "match", "ip", "dst", f"{self.address(peer, rail)}/32", "flowid", "1:20")  # fmt: skip

    # --- a screen -----------------------------------------------------------------------------------

    def mpiexec_options(self, per_host: int) -> list[str]:
        done = subprocess.run(
            [str(SCRIPT), "mpiexec-options", str(self.hosts), str(per_host)],
            capture_output=True,
            text=True,
            env=self.env,
            check=True,
        )
        return done.stdout.split()

    def run(
        self, mpiexec: str, per_host: int, args: list[str], timeout: float, fault: Planted | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`rdmabench run ARGS` over `per_host` ranks a host (UCX over tcp on the veths), stopped
        after `timeout` seconds; with a CPU fault, the host's ranks are contended once they run."""
        env = dict(self.env, UCX_TLS="tcp,self", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        env["PATH"] = os.path.dirname(mpiexec) + os.pathsep + env.get("PATH", "")  # prted beside mpiexec
        command = [mpiexec, "-n", str(self.hosts * per_host), *self.mpiexec_options(per_host)]
        command += python_module("rdmabench", "run", *args)
        end = time.monotonic() + timeout
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        out: list[str] = []
        err: list[str] = []
        started = threading.Event()  # rank 0 printed the run's first line: every rank has started
        readers = [
            threading.Thread(target=_read, args=(proc.stdout, out, started), daemon=True),
            threading.Thread(target=_read, args=(proc.stderr, err, None), daemon=True),
        ]
        for reader in readers:
            reader.start()
        code = 124
        try:
            with self._contended(fault, per_host, proc, started, end):
                code = proc.wait(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            err.append(f"rdmabench: error: the run took more than {timeout:.0f} s and was stopped\n")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for reader in readers:
                reader.join(timeout=10)
        return subprocess.CompletedProcess(command, code, "".join(out), "".join(err))

    @contextmanager
    def _contended(
        self, fault: Planted | None, per_host: int, proc: subprocess.Popen[str], started: threading.Event, end: float
    ) -> Iterator[None]:
        """With a CPU fault: once every rank runs, the host's ranks and `fault.busy` busy processes
        are pinned to the last core this process may use and share `fault.quota` of it (a CPU
        cgroup); the busy processes end with the block, or by `end`, and the group is removed."""
        if fault is None or fault.kind != "cpu":
            yield
            return
        while not started.wait(0.2) and proc.poll() is None and time.monotonic() < end:
            pass
        core = str(max(os.sched_getaffinity(0)))
        ranks = [pid for pid in self.pids(fault.host) if _is_rank(pid)]
        seconds = max(1.0, end - time.monotonic())
        spin = f"import time\nend = time.monotonic() + {seconds:.0f}\nwhile time.monotonic() < end: pass"
        busy = [
            subprocess.Popen(["taskset", "-c", core, *python_code(spin)], stdin=subprocess.DEVNULL)
            for _ in range(fault.busy)
        ]
        group = CpuGroup(f"rdmabench-{self.prefix}-h{fault.host}", fault.quota)
        try:
            for pid in ranks:
                subprocess.run(["taskset", "-a", "-p", "-c", core, str(pid)], capture_output=True)
            group.add([*ranks, *(one.pid for one in busy)])
            yield
        finally:
            for one in busy:
                one.kill()
                one.wait()
            group.remove()


def _read(stream: IO[str] | None, into: list[str], started: threading.Event | None) -> None:
    """Every line of `stream` into `into`; `started` set at the run's first line ("# rdmabench ...")."""
    if stream is None:
        return
    for line in stream:
        into.append(line)
        if started is not None and line.startswith("# rdmabench "):
            started.set()
    if started is not None:
        started.set()  # ended: nothing more to wait for


class CpuGroup:
    """A CPU cgroup (v1's cpu controller, or v2's cpu.max) whose processes share `quota` of a core."""

    PERIOD_US = 10_000  # short: the group is held back often and briefly, not for most of a sample

    def __init__(self, name: str, quota: float):
        unified = Path("/sys/fs/cgroup/cgroup.controllers").exists()
        self.root = Path("/sys/fs/cgroup") if unified else Path("/sys/fs/cgroup/cpu")
        self.path = self.root / name
        self.path.mkdir(mode=0o755)  # a new one: never another's
        limit = str(max(1000, int(quota * self.PERIOD_US)))
        if unified:
            (self.path / "cpu.max").write_text(f"{limit} {self.PERIOD_US}")
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(self.PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(limit)

    def add(self, pids: list[int]) -> None:
        for pid in pids:
            try:
                (self.path / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                pass  # ended meanwhile

    def remove(self) -> None:
        """Whatever still runs in the group back to the root group, then the group removed."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                for pid in (self.path / "cgroup.procs").read_text().split():
                    try:
                        (self.root / "cgroup.procs").write_text(pid)
                    except OSError:
                        pass
                time.sleep(0.1)


def _is_rank(pid: int) -> bool:
    """Whether process `pid` is an rdmabench rank (a Python running `-m rdmabench run`)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"rdmabench" in words and b"run" in words


@contextmanager
def namespace_cluster(hosts: int, rails: int, prefix: str, subnet: int = 0) -> Iterator[NamespaceCluster]:
    """A NamespaceCluster, built and, whatever happens, taken down."""
    if not 1 <= hosts <= 253 or not 1 <= rails <= 8:
        raise ConfigError(f"a namespace cluster holds 1 to 253 hosts of 1 to 8 rails, not {hosts} x {rails}")
    cluster = NamespaceCluster(hosts, rails, prefix, subnet)
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()
