"""Parsing the protocol-selection report that UCX printed in real runs (files under tests/data)."""

from pathlib import Path

from rdmabench.wire.protoinfo import RMA_PUT, ProtoRow, is_plain_tag_send, parse_tables

DATA = Path(__file__).parent / "data"


def test_shared_memory_report() -> None:
    tables = parse_tables((DATA / "ucx_proto_info_shm.log").read_text())
    plain = [t for t in tables if is_plain_tag_send(t)]
    assert len(tables) == 3 and len(plain) == 1
    table = plain[0]
    assert (table.locality, table.config, table.memory) == ("intra-node", 0, "host")
    assert table.lookup(8).transport == "sysv/memory"  # type: ignore[union-attr]
    assert table.lookup(92).protocol == "eager short"  # type: ignore[union-attr]
    assert table.lookup(93).protocol == "eager copy-in copy-out"  # type: ignore[union-attr]
    big = table.lookup(64 << 20)
    assert big is not None and big.transport == "cma/memory" and "rendezvous" in big.protocol
    assert table.lookup(8192) == big  # "8K..inf" starts at 8 KiB


def test_tcp_report_with_single_size_row() -> None:
    tables = [t for t in parse_tables((DATA / "ucx_proto_info_tcp.log").read_text()) if is_plain_tag_send(t)]
    table = tables[0]
    assert table.lookup(0).protocol == "eager short"  # type: ignore[union-attr]
    assert table.lookup(16352).protocol == "(?) rendezvous zero-copy"  # type: ignore[union-attr]
    assert table.lookup(1 << 20).transport == "tcp/lo"  # type: ignore[union-attr]


def test_text_without_tables() -> None:
    assert parse_tables("[1] [vm:1 :0] parser.c:2355 UCX  WARN  something\n| not | a table |\n") == []


def _rows(name: str, side: str, operation: str, memory: str, peer: str | None, nbytes: int):  # type: ignore[no-untyped-def]
    from rdmabench.wire.protoinfo import parse_tables

    for table in parse_tables((DATA / f"h200_{name}.{side}.log").read_text()):
        if table.operation == operation and table.memory == memory and table.peer_memory in (None, peer):
            return table.lookup(nbytes)
    return None


def _resolve(name: str, src: str, dst: str, nbytes: int):  # type: ignore[no-untyped-def]
    from rdmabench.wire.protoinfo import RNDV_FETCH, RNDV_SEND, TAG_SEND, resolve

    return resolve(
        _rows(name, "sender", TAG_SEND, src, None, nbytes),
        _rows(name, "sender", RNDV_SEND, src, dst, nbytes),
        _rows(name, "receiver", RNDV_FETCH, dst, src, nbytes),
    )


def test_gpu_to_gpu_reads_over_cuda_ipc() -> None:
    """Real report from two H200s: the receiver reads the sender's GPU memory with CUDA IPC."""
    row, source = _resolve("device_to_device", "cuda", "cuda", 64 << 20)
    assert row is not None and row.transport == "cuda_ipc/cuda" and source == "rendezvous data fetch"
    assert row.protocol == "zero-copy read from remote"
    small, source = _resolve("device_to_device", "cuda", "cuda", 100)
    assert small is not None and small.protocol == "eager copy-in copy-out" and source == "tag send"


def test_host_to_gpu_is_pushed_by_the_sender() -> None:
    """The receiver's fetch rows are tentative; the sender's push through its GPU is what ran."""
    row, source = _resolve("pinned_to_device", "host", "cuda", 1 << 20)
    assert source == "rendezvous data send"
    assert row is not None and row.transport == "cuda_ipc/cuda" and "cuda_copy" in row.protocol


def test_gpu_to_host_is_read_then_copied_by_the_receiver() -> None:
    row, source = _resolve("device_to_pinned", "cuda", "host", 64 << 20)
    assert source == "rendezvous data fetch"
    assert row is not None and row.protocol.startswith("pipeline read from remote, cuda_copy")


def test_host_to_host_rendezvous_keeps_the_tag_send_choice() -> None:
    from rdmabench.wire.protoinfo import TAG_SEND, parse_tables, resolve

    (table,) = [t for t in parse_tables((DATA / "ucx_proto_info_shm.log").read_text()) if t.operation == TAG_SEND]
    row, source = resolve(table.lookup(1 << 20), None, None)
    assert row is not None and row.transport == "cma/memory" and source == "tag send"


def test_a_later_ucxs_report_with_its_header_on_two_lines() -> None:
    """NIXL's own UCX build prints each table's header on two lines and a row naming the columns (a
    real NIXL initiator's log): every table is read, the loopback (self) ones left out as before."""
    tables = parse_tables((DATA / "ucx_proto_info_nixl.log").read_text())
    puts = [t for t in tables if t.operation.startswith(RMA_PUT)]
    assert [(t.context, t.locality, t.config, t.memory, t.peer_memory) for t in puts] == [
        ("rdmabench-nixl-initiator", "intra-node", 1, "host", "host")
    ] * 2
    assert [t.operation for t in puts] == [RMA_PUT, RMA_PUT + "(multi)"]
    assert puts[0].lookup(1 << 30) == ProtoRow(0, float("inf"), "zero-copy", "cma/memory")
    am = [t for t in tables if t.operation == "active message by ucp_am_send*"]
    assert am and am[-1].lookup(100) == ProtoRow(1, 16515, "zero-copy", "tcp/lo")
    assert all(t.locality == "intra-node" and t.rows for t in tables)


def test_a_links_path_from_its_typed_report_rows() -> None:
    """describe_path reads a tagged link's TagRows (sender's rows, receiver's fetch) and a one-sided
    link's RmaRows; a link whose UCX printed no table of its configuration reports nothing."""
    from rdmabench.wire.protoinfo import RNDV_FETCH, RNDV_SEND, TAG_SEND, RmaRows, TagRows
    from rdmabench.wire.ucx import describe_path

    big = 64 << 20
    tag = _rows("device_to_device", "sender", TAG_SEND, "cuda", None, big)
    send = _rows("device_to_device", "sender", RNDV_SEND, "cuda", "cuda", big)
    fetch = _rows("device_to_device", "receiver", RNDV_FETCH, "cuda", "cuda", big)
    path = describe_path(TagRows(tag, send, None, "intra-node"), fetch)
    assert (path.transport, path.protocol, path.ucx_locality) == (
        "cuda_ipc/cuda",
        "zero-copy read from remote",
        "intra-node",
    )
    assert path.ucx_report["decided_by"] == "rendezvous data fetch"
    assert path.ucx_report["receiver_rndv_fetch"] == "zero-copy read from remote | cuda_ipc/cuda"
    assert list(path.ucx_report) == ["decided_by", "sender_tag_send", "sender_rndv_send", "receiver_rndv_fetch"]
    nothing = describe_path(TagRows(), None)
    assert (nothing.transport, nothing.ucx_locality, nothing.ucx_report["decided_by"]) == (None, None, None)
    rma = describe_path(RmaRows(RMA_PUT, ProtoRow(0, float("inf"), "zero-copy", "cuda_ipc/cuda"), "intra-node"), None)
    assert (rma.transport, rma.ucx_report["decided_by"]) == ("cuda_ipc/cuda", RMA_PUT)
    assert rma.ucx_report["initiator_rma"] == "zero-copy | cuda_ipc/cuda" and "sender_tag_send" not in rma.ucx_report
    unreported = describe_path(RmaRows(RMA_PUT), None)
    assert unreported.ucx_report == {"decided_by": None, "initiator_rma": None}
