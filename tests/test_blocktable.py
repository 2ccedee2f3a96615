"""Block tables replayed from a file (--blocks-from): real files, real ranks and real UCX transfers of
the table's slots; every malformed or unsafe file refused in one line before anything runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rdmabench.job.config import RunConfig
from rdmabench.measure import blocktable
from rdmabench.measure.blocks import MAX_BLOCKS
from rdmabench.results.files.document import load as load_results
from rdmabench.wire import native

from .conftest import QUICK, refused_in_one_line, run_cli

needs_native = pytest.mark.skipif(native.load().library is None, reason=f"no native loop: {native.load().reason}")

# Transfer 0: local 12-14 with remote 7-9 (one request), 40 with 3, 100-102 with 4-6 (one), 103 with 30;
# transfer 1: local 1-8 with remote 100-107 (one request). 16 blocks, 5 requests when merged.
TABLE = {
    "block_size": 4096,
    "transfers": [
        {"local": [12, 13, 14, 40, [409600, 16384]], "remote": [7, 8, 9, 3, 4, 5, 6, 30]},
        {"local": [1, 2, 3, 4, 5, 6, 7, 8], "remote": [[409600, 32768]]},
    ],
}


def _table(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_a_table_reads_as_each_ends_slots_oriented_by_who_posts(tmp_path: Path) -> None:
    path = _table(tmp_path / "t.json", TABLE)
    table = blocktable.load(str(path))
    assert (table.block_size, table.transfers, table.count, table.descriptors) == (4096, 2, 8, (13, 9))
    assert table.local.tolist() == [12, 13, 14, 40, 100, 101, 102, 103, 1, 2, 3, 4, 5, 6, 7, 8]
    assert table.remote[8:].tolist() == list(range(100, 108)) and table.slots_needed == 108
    # The local end posts: a put's source, a get's destination.
    for test, local_end in (("put", "src"), ("get", "dst"), ("bw", "src")):
        config = RunConfig.from_options({"test": test, "blocks_from": str(path)})
        shape = config.shape.first
        assert shape is not None and shape.layout == "table" and shape.per_step == 16
        assert np.array_equal(shape.slots(local_end, 4096), table.local)
    record = table.record()
    assert record["sha256"] == table.sha256 and len(record["sha256"]) == 64 and record["file"] == str(path)
    path.write_text(json.dumps({**TABLE, "block_size": 8192}))
    with pytest.raises(blocktable.ConfigError, match="the file changed since the run was checked"):
        blocktable.load(str(path), table.sha256)


@needs_native
@pytest.mark.parametrize("test", ["put", "get", "bw"])
def test_a_table_is_replayed_block_by_block_and_merged_where_adjacent(tmp_path: Path, test: str) -> None:
    path = _table(tmp_path / "kv table.json", TABLE)
    out = tmp_path / "r.json"
    proc = run_cli(["run", "--np", "2", "-o", str(out), *QUICK, "--test", test, "--blocks-from", str(path)])
    assert proc.returncode == 0, proc.stderr
    assert f"per transfer: 8 blocks, table {path} (13 descriptors), 2 transfers in flight" in proc.stdout
    reference, entry = load_results(str(out))["results"]
    assert reference["size_bytes"] == 8 * 4096 and entry["size_bytes"] == 4096
    assert entry["validated"] and entry["wrong_bytes"] == 0
    record = entry["blocks"]
    assert (record["count"], record["batch"], record["layout"], record["pool_bytes"]) == (8, 2, "table", 108 * 4096)
    assert record["posted_descriptors"] == 5 and record["merged"] is True
    assert record["table"] == blocktable.load(str(path)).record()


def _refused(tmp_path: Path, document: Any, message: str, *args: str) -> None:
    path = _table(tmp_path / "t.json", document)
    refused_in_one_line(tmp_path, ["--test", "put", "--blocks-from", str(path), *args], message)


@pytest.mark.parametrize(
    "document, message",
    [
        ("{not json", "not JSON"),
        ([1, 2], "not a JSON object with block_size and transfers"),
        ({"block_size": 4096}, "no transfers"),
        ({**TABLE, "layers": 2}, "unknown key(s) layers"),
        ({**TABLE, "block_size": 1004}, "block_size is bytes, a multiple of 8, not 1004"),
        ({"block_size": 4096, "transfers": []}, "transfers is a list"),
        ({"block_size": 4096, "transfers": [{"local": [1]}]}, "transfer 0 is not an object of local and remote"),
        ({"block_size": 4096, "transfers": [{"local": [1, 2], "remote": [3]}]}, "moves 2 blocks from local and 1"),
        (
            {"block_size": 4096, "transfers": [{"local": [1], "remote": [3]}, {"local": [2, 4], "remote": [5, 6]}]},
            "transfer 1 moves 2 blocks, transfer 0 1",
        ),
        ({"block_size": 4096, "transfers": [{"local": [[100, 4096]], "remote": [3]}]}, "not whole blocks of 4096"),
        ({"block_size": 4096, "transfers": [{"local": [-1], "remote": [3]}]}, "slot -1 is not within 0 to"),
        (
            {"block_size": 4096, "transfers": [{"local": [1 << 64], "remote": [3]}]},
            f"slot {1 << 64} is not within 0 to",
        ),
        ({"block_size": 4096, "transfers": [{"local": [1], "remote": [-(1 << 70)]}]}, "is not within 0 to"),
        ({"block_size": 4096, "transfers": [{"local": ["a"], "remote": [3]}]}, "'a' is neither a slot nor"),
        ({"block_size": 4096, "transfers": [{"local": [1, 1], "remote": [3, 4]}]}, "local slot 1 is named twice"),
        (
            {"block_size": 8, "transfers": [{"local": [[0, 8 * (MAX_BLOCKS + 1)]], "remote": [0]}]},
            f"more than {MAX_BLOCKS} blocks in a step",
        ),
    ],
)
def test_a_malformed_table_is_refused_in_one_line(tmp_path: Path, document: Any, message: str) -> None:
    _refused(tmp_path, document, message)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--blocks", "8"], "--blocks-from sets the blocks and their size: leave out --blocks"),
        (["--layout", "random", "--batch", "2"], "leave out --layout, --batch"),
        (["--sizes", "8KiB"], "--blocks-from sets the block size: leave out --sizes"),
        (["--model", "llama-3.1-8b"], "--blocks-from and --model each set the blocks"),
        (["--pool", "64KiB"], "--blocks-from's table of 16 blocks of 4096 bytes needs 108 slots"),
    ],
)
def test_options_a_table_sets_are_refused_beside_it(tmp_path: Path, args: list[str], message: str) -> None:
    _refused(tmp_path, TABLE, message, *args)


def test_a_table_behind_another_place_or_no_file_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    _table(shared / "t.json", TABLE)
    os.chmod(shared, 0o777)  # a folder anyone can write: what a link into it reads can be swapped
    (tmp_path / "link.json").symlink_to(shared / "t.json")
    args = ["--test", "put", "--blocks-from", str(tmp_path / "link.json")]
    refused_in_one_line(tmp_path, args, "other users can write to it", process=True)
    os.mkfifo(tmp_path / "fifo")  # never opened for reading: that would wait for a writer
    refused_in_one_line(
        tmp_path, ["--test", "put", "--blocks-from", str(tmp_path / "fifo")], "not a regular file", process=True
    )
    refused_in_one_line(
        tmp_path, ["--test", "put", "--blocks-from", str(tmp_path / "none")], "cannot read", process=True
    )


def test_a_table_of_our_own_behind_our_own_link_is_read(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    _table(own / "t.json", TABLE)
    os.chmod(own / "t.json", 0o600)
    (tmp_path / "link.json").symlink_to(own / "t.json")
    assert blocktable.load(str(tmp_path / "link.json")).count == 8
