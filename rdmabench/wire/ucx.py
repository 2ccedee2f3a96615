"""The UCX data plane: one worker per rank, endpoints built from worker addresses exchanged over MPI.

Endpoints come from worker addresses (not a listener and sockaddr): that is the wire-up under which
UCX offers shared memory (cma, sysv) and CUDA IPC between ranks of one node; a listener connection
went over TCP loopback instead. Endpoint error handling is off for the same reason: it excludes the
shared-memory transports. Requests are polled from the calling thread with no asyncio task per
message, so Python adds little to each transfer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from ..errors import TransportError
from . import protoinfo, ucx_env

# Check the deadline once per this many progress calls: reading the clock on every poll costs more
# than a small message.
_POLLS_PER_CLOCK_READ = 64
# Progress calls after closing the endpoints, before dropping them.
_CLOSE_POLLS = 1000
# How often a long wait checks its deadline and whether a peer on this host still lives.
_LIVENESS_PERIOD = 0.25


class Request(Protocol):
    @property
    def completed(self) -> bool: ...

    def check_error(self) -> None: ...


class Driven(Protocol):
    """Work the poll loop must push along besides UCX (a staged pipeline's copies and sends)."""

    @property
    def completed(self) -> bool: ...

    def check_error(self) -> None: ...

    def advance(self) -> bool: ...


class Backend(Protocol):
    name: str
    version: str

    def worker_address(self) -> bytes: ...

    def connect(self, address: bytes) -> Any: ...

    def wrap(self, array: Any) -> Any: ...

    def tag(self, value: int) -> Any: ...

    def send(self, endpoint: Any, message: Any, tag: Any) -> Request: ...

    def recv(self, message: Any, tag: Any) -> Request: ...

    def poster(self, endpoint: Any) -> Callable[[Any, Any], Request]: ...

    def taker(self) -> Callable[[Any, Any], Request]: ...

    def worker_handle(self) -> int: ...

    def context_handle(self) -> int: ...

    def endpoint_handle(self, endpoint: Any) -> int: ...

    def progress(self) -> None: ...

    def close(self) -> None: ...


class _DeviceFeature:
    """UCP_FEATURE_DEVICE, which UCXX's Feature enum lacks; UCXContext reads each flag's `value`."""

    value = 1 << 8


class UcxxBackend:
    """UCXX's synchronous core API (ucxx._lib.libucxx)."""

    name = "ucxx"

    def __init__(self, one_sided: bool = False, device_lists: bool = False) -> None:
        import ucxx
        import ucxx._lib.libucxx as api
        from ucxx._lib.arr import Array

        self._api = api
        self._array = Array
        self.version = str(getattr(ucxx, "__version__", "unknown"))
        self.ucx_version = ".".join(str(part) for part in api.get_ucx_version())
        # RMA only when a one-sided test runs: the tagged tests' transports stay what they were.
        features: tuple[Any, ...] = (api.Feature.TAG, api.Feature.RMA) if one_sided else (api.Feature.TAG,)
        if device_lists:  # endpoints with a device lane: block lists the GPU posts (devapi.py)
            features += (_DeviceFeature(),)
        self._context = api.UCXContext(feature_flags=features)
        self._worker = api.UCXWorker(self._context)
        self._endpoints: list[Any] = []

    def worker_address(self) -> bytes:
        return bytes(self._worker.address.tobytes())

    def connect(self, address: bytes) -> Any:
        ucx_address = self._api.UCXAddress.create_from_buffer(address)
        endpoint = self._api.UCXEndpoint.create_from_worker_address(self._worker, ucx_address, False)
        self._endpoints.append(endpoint)
        return endpoint

    def wrap(self, array: Any) -> Any:
        return self._array(array)

    def tag(self, value: int) -> Any:
        return self._api.UCXXTag(value)

    def send(self, endpoint: Any, message: Any, tag: Any) -> Request:
        return endpoint.tag_send(message, tag)  # type: ignore[no-any-return]

    def recv(self, message: Any, tag: Any) -> Request:
        return self._worker.tag_recv(message, tag)  # type: ignore[no-any-return]

    def poster(self, endpoint: Any) -> Callable[[Any, Any], Request]:
        """send() for one endpoint as UCXX's own bound method: no Python frame per message."""
        return endpoint.tag_send  # type: ignore[no-any-return]

    def taker(self) -> Callable[[Any, Any], Request]:
        return self._worker.tag_recv  # type: ignore[no-any-return]

    def context_handle(self) -> int:
        """The ucp_context_h underneath: one-sided tests map memory with it."""
        return int(self._context.handle)

    def worker_handle(self) -> int:
        """The ucp_worker_h underneath, for the native hot loop."""
        return int(self._worker.handle)

    def endpoint_handle(self, endpoint: Any) -> int:
        return int(endpoint.handle)

    def progress(self) -> None:
        self._worker.progress()

    def close(self) -> None:
        """Close every endpoint. Closing flushes, which needs the peer to progress its worker: every
        rank closes at the same point of the job and keeps progressing while it waits on MPI
        (World.wait_for_all), so no flush waits on a rank that has stopped listening."""
        for endpoint in self._endpoints:
            try:
                endpoint.close()
            except Exception:
                pass  # already closed or failed: nothing left to flush
        for _ in range(_CLOSE_POLLS):
            self._worker.progress()
        self._endpoints.clear()


# Settings that choose UCX's transports and devices: a wrong one stops UCX with "No such device".
_DEVICE_SETTINGS = ("UCX_TLS", "UCX_NET_DEVICES", "UCX_IB_GPU_DIRECT_RDMA")


def load_backend(one_sided: bool = False, device_lists: bool = False) -> Backend:
    try:
        return UcxxBackend(one_sided, device_lists)
    except ImportError as exc:
        raise TransportError(f"UCXX is not installed ({exc}); install rdmabench with the cu12 or cu13 extra") from None
    except Exception as exc:  # UCXX's own errors (no device, bad configuration) carry no hint of the cause
        chosen = [f"{name}={os.environ[name]}" for name in _DEVICE_SETTINGS if name in os.environ]
        hint = f"; check {', '.join(chosen)} (`rdmabench doctor` lists this UCX's transports)" if chosen else ""
        raise TransportError(f"UCX could not start: {type(exc).__name__}: {exc}{hint}") from None


class UcxReport(TypedDict, total=False):
    """The rows of UCX's report a link's path was chosen from, as a results entry's `ucx_report` holds
    them (docs/results-format.md): a one-sided link's initiator row, or a tagged link's three; each
    "protocol | transport", or None where UCX reported none."""

    decided_by: str | None  # the row that decided (a tagged link: "tag send", ...; one-sided: the operation)
    initiator_rma: str | None
    sender_tag_send: str | None
    sender_rndv_send: str | None
    receiver_rndv_fetch: str | None


@dataclass(frozen=True)
class PathReport:
    """One direction of a link as UCX reported it: the transport and protocol it used, its locality, and
    the report rows that say so."""

    transport: str | None
    protocol: str | None
    ucx_locality: str | None
    ucx_report: UcxReport


def describe_path(sender_rows: protoinfo.PathRows, fetch: protoinfo.ProtoRow | None) -> PathReport:
    """One direction of a link, from the sender's UCX report rows and the receiver's rendezvous-fetch
    row (a one-sided link's from its initiator's rows alone)."""
    if isinstance(sender_rows, protoinfo.RmaRows):
        rma = sender_rows.rma
        return PathReport(
            rma.transport if rma else None,
            rma.protocol if rma else None,
            sender_rows.locality,
            {
                "decided_by": sender_rows.operation if rma else None,
                "initiator_rma": f"{rma.protocol} | {rma.transport}" if rma else None,
            },
        )
    row, source = protoinfo.resolve(sender_rows.tag, sender_rows.send, fetch)

    def text(r: protoinfo.ProtoRow | None) -> str | None:
        return f"{r.protocol} | {r.transport}" if r else None

    return PathReport(
        row.transport if row else None,
        row.protocol if row else None,
        sender_rows.locality,
        {
            "decided_by": source if row else None,
            "sender_tag_send": text(sender_rows.tag),
            "sender_rndv_send": text(sender_rows.send),
            "receiver_rndv_fetch": text(fetch),
        },
    )


class _Watch:
    """The deadline of one wait, and the peers on this host whose death ends it early."""

    def __init__(self, transport: Transport, timeout: float, what: str, peers: list[int]):
        self.transport = transport
        self.timeout = timeout
        self.what = what
        self.peers = peers
        self.started = time.monotonic()
        self.next_check = self.started + _LIVENESS_PERIOD

    def check(self) -> None:
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + _LIVENESS_PERIOD
        if now - self.started > self.timeout:
            raise TransportError(f"timed out after {self.timeout:.0f} s waiting for {self.what}")
        for rank in self.peers:
            self.transport._check_alive(rank, self.what)


class Transport:
    """This rank's UCX worker and its endpoints to every other rank."""

    def __init__(
        self,
        comm: Any,
        log_dir: str | None,
        local_peer_pids: dict[int, int] | None = None,
        hosts: list[str] | None = None,
        one_sided: bool = False,
        device_lists: bool = False,
    ):
        self.backend = load_backend(one_sided, device_lists)
        self.rank = comm.Get_rank()
        self._hosts = hosts
        self._local_peer_pids = local_peer_pids or {}
        self._addresses: list[bytes] = comm.allgather(self.backend.worker_address())
        self._endpoints: dict[int, Any] = {}
        self._log_dir = log_dir
        self._tables_at_connect: dict[int, int] = {}
        self._endpoint_config: dict[int, int] = {}
        self._driven: list[Driven] = []
        self._parsed: tuple[int, list[protoinfo.ProtoTable]] = (-1, [])
        self.native: Any = None  # the native hot loop's library, when this run uses it (native.load())

    def drive(self, work: Driven) -> Driven:
        """Advance `work` on every poll from now until it completes."""
        if not work.completed:
            self._driven.append(work)
        return work

    def stop_driving(self, work: Driven) -> None:
        if work in self._driven:
            self._driven.remove(work)

    def _progress_and_drive(self) -> None:
        self.backend.progress()
        driven = self._driven
        for work in list(driven):
            if work.advance():
                driven.remove(work)

    def _progress_function(self) -> Callable[[], None]:
        # Plain UCX progress in the common case: the hot loop pays nothing for staging.
        return self._progress_and_drive if self._driven else self.backend.progress

    def endpoint(self, peer: int) -> Any:
        endpoint = self._endpoints.get(peer)
        if endpoint is None:
            self._tables_at_connect[peer] = len(self._tables())
            endpoint = self.backend.connect(self._addresses[peer])
            self._endpoints[peer] = endpoint
        return endpoint

    def endpoint_handle(self, peer: int) -> int:
        """The ucp_ep_h of the endpoint to `peer` (made if needed), for the native loop."""
        return self.backend.endpoint_handle(self.endpoint(peer))

    def send(self, peer: int, message: Any, tag: Any) -> Request:
        """Post a tagged send; `tag` comes from backend.tag() (made once, reused every step)."""
        return self.backend.send(self.endpoint(peer), message, tag)

    def recv(self, message: Any, tag: Any) -> Request:
        return self.backend.recv(message, tag)

    def sender(self, peer: int) -> Callable[[Any, Any], Request]:
        """The fastest way to post sends to `peer`: call it with (message, tag) in hot loops."""
        return self.backend.poster(self.endpoint(peer))

    def receiver(self) -> Callable[[Any, Any], Request]:
        return self.backend.taker()

    def wait(self, requests: list[Request], timeout: float, what: str, peer: int | list[int] | None = None) -> None:
        """Progress until every request completes (timeout and `peer` as in poll_until).

        This is the hot path of every test, so it polls inline rather than through poll_until's
        callback (a call per poll costs a measurable share of a small message's latency). A cursor
        walks the list in order: a poll costs one completion check however long the window is."""
        progress = self._progress_function()
        count = len(requests)
        index = 0
        polls = 0
        watch: _Watch | None = None
        while index < count:
            if requests[index].completed:
                index += 1
                continue
            progress()
            polls += 1
            if polls % _POLLS_PER_CLOCK_READ == 0:
                watch = watch or _Watch(self, timeout, what, [peer] if isinstance(peer, int) else (peer or []))
                watch.check()
        self.check(requests, what)

    def poll_until(
        self, done: Callable[[], bool], timeout: float, what: str, peer: int | list[int] | None = None
    ) -> None:
        """Progress the worker until `done()` is true. Raise TransportError after `timeout` seconds,
        or as soon as a `peer` (a rank, or several) running on this host is seen to have died."""
        peers = [peer] if isinstance(peer, int) else (peer or [])
        watch = _Watch(self, timeout, what, peers)
        polls = 0
        while True:
            # Chosen every poll: `done` may start staged pipelines, which need driving from then on.
            self._progress_function()()
            if done():
                return
            polls += 1
            if polls % _POLLS_PER_CLOCK_READ == 0:
                watch.check()

    def local_pid(self, peer: int) -> int:
        """The peer's process id when it runs on this host, else 0."""
        return self._local_peer_pids.get(peer, 0)

    def local_pid_ranks(self) -> dict[int, int]:
        """Rank of each process id on this host: a dead peer's pid named back as its rank."""
        return {pid: rank for rank, pid in self._local_peer_pids.items()}

    def _check_alive(self, peer: int, what: str) -> None:
        pid = self._local_peer_pids.get(peer)
        if pid is None:
            return
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise TransportError(f"rank {peer} (pid {pid} on this host) died while waiting for {what}") from None
        except PermissionError:
            pass  # alive, owned by someone else

    @staticmethod
    def check(requests: list[Request], what: str) -> None:
        for request in requests:
            try:
                request.check_error()
            except Exception as exc:
                raise TransportError(f"UCX failed {what}: {exc}") from None

    def _config(self, peer: int, tables: list[protoinfo.ProtoTable]) -> int | None:
        """UCX's configuration index of the endpoint to `peer`: the one whose tag-send table UCX
        printed first after that endpoint was created. UCX prints a configuration once: an endpoint
        that reuses one (a second peer on the same node, say) printed nothing new, and shares the
        configuration of a connected peer placed alike, or, where UCX had printed one configuration
        only before it connected, that one (it cannot be another: a new one would have been printed).
        (Namespace "hosts" on one machine are one node to UCX: a peer on another of them may reuse
        the configuration of a peer on this one.)"""
        config = self._endpoint_config.get(peer)
        if config is None and peer in self._endpoints:
            config = self._printed_after_connect(peer, tables)
            alike = (other for other in self._endpoints if other != peer and self._placed_alike(other, peer))
            for other in alike:
                if config is not None:
                    break
                config = self._endpoint_config.get(other) or self._printed_after_connect(other, tables)
            if config is None:
                before = tables[: self._tables_at_connect.get(peer, 0)]
                printed = {t.config for t in before if protoinfo.is_plain_tag_send(t)}
                config = printed.pop() if len(printed) == 1 else None
            if config is not None:
                self._endpoint_config[peer] = config
        return config

    def _printed_after_connect(self, peer: int, tables: list[protoinfo.ProtoTable]) -> int | None:
        since_connect = tables[self._tables_at_connect.get(peer, 0) :]
        first = next((t for t in since_connect if protoinfo.is_plain_tag_send(t)), None)
        return first.config if first is not None else None

    def _placed_alike(self, a: int, b: int) -> bool:
        """Both peers on this rank's host, or both elsewhere (without hosts: unknown, so no)."""
        if self._hosts is None:
            return False
        mine = self._hosts[self.rank]
        return (self._hosts[a] == mine) == (self._hosts[b] == mine)

    def _row(
        self,
        tables: list[protoinfo.ProtoTable],
        config: int,
        operation: str,
        memory: str,
        peer_memory: str | None,
        nbytes: int,
    ) -> protoinfo.ProtoRow | None:
        for table in reversed(tables):
            if table.config == config and table.operation == operation and table.memory == memory:
                if peer_memory is None or table.peer_memory in (None, peer_memory):
                    row = table.lookup(nbytes)
                    if row is not None:
                        return row
        return None

    def path_rows(self, peer: int, memory: str, peer_memory: str, nbytes: int) -> protoinfo.TagRows:
        """What this rank's UCX reported for `nbytes` messages to and from `peer`: as a sender, its
        tag-send and rendezvous-push rows; as a receiver, its rendezvous-fetch row. `memory` is this
        rank's memory type ("host" or "cuda"), `peer_memory` the peer's."""
        tables = self._tables()
        config = self._config(peer, tables)
        if config is None:
            return protoinfo.TagRows()
        return protoinfo.TagRows(
            self._row(tables, config, protoinfo.TAG_SEND, memory, None, nbytes),
            self._row(tables, config, protoinfo.RNDV_SEND, memory, peer_memory, nbytes),
            self._row(tables, config, protoinfo.RNDV_FETCH, memory, peer_memory, nbytes),
            next((t.locality for t in tables if t.config == config), None),
        )

    def rma_rows(self, peer: int, operation: str, memory: str, peer_memory: str, nbytes: int) -> protoinfo.RmaRows:
        """What this rank's UCX reported for one-sided `operation` (protoinfo.RMA_PUT or RMA_GET) of
        `nbytes` to or from `peer`: the initiator's row, which names the transport."""
        tables = self._tables()
        config = self._config(peer, tables)
        if config is None:
            return protoinfo.RmaRows(operation)
        return protoinfo.RmaRows(
            operation,
            self._row(tables, config, operation, memory, peer_memory, nbytes),
            next((t.locality for t in tables if t.config == config), None),
        )

    def ucx_warnings(self) -> list[str]:
        return ucx_env.forward_warnings(self._log_text())

    def _log_text(self) -> str:
        if not self._log_dir:
            return ""
        ucx_env.flush_c_streams()
        log_file = ucx_env.own_log_file(self._log_dir)
        if not log_file:
            return ""
        with open(log_file, errors="replace") as handle:
            return handle.read()

    def _tables(self) -> list[protoinfo.ProtoTable]:
        """UCX's tables so far; parsed again only when the log has grown (every link asks)."""
        text = self._log_text()
        if len(text) != self._parsed[0]:
            self._parsed = (len(text), protoinfo.parse_tables(text))
        return self._parsed[1]

    def close(self) -> None:
        self._driven.clear()
        self._endpoints.clear()
        self.backend.close()
