"""The host memory copy's figure kept per host and boot (hardware/copycache.py): taken on this boot,
measured again on another, after a corrupt or untrusted cache file, and on request; its provenance
in the results."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from rdmabench.hardware import copycache, limits, topology
from rdmabench.results.files.document import load as load_results

from .conftest import QUICK, rdmabench_env, run_cli


class Copier:
    """Stands in for the 64-256 MiB memory copy (a second each): counts the times it is asked, and
    answers as this host's copy would be sized."""

    def __init__(self, gbps: float = 11.0) -> None:
        self.gbps, self.calls = gbps, 0

    def __call__(self) -> topology.HostCopy:
        self.calls += 1
        cache = topology.last_level_cache_bytes()
        return topology.HostCopy(self.gbps, topology.probe_bytes(cache), cache)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def _file(cache: Path) -> Path:
    (found,) = cache.glob("host-copy-*.json")
    return found


def test_the_figure_is_measured_once_a_boot_and_taken_from_the_cache_after(cache: Path) -> None:
    copier = Copier()
    first = copycache.host_copy(dirs=[cache], measure=copier)
    assert copier.calls == 1 and not first.cached and first.provenance == "measured" and first.measured_utc
    kept = _file(cache)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700 and stat.S_IMODE(kept.stat().st_mode) == 0o600
    again = copycache.host_copy(dirs=[cache], measure=copier)
    assert copier.calls == 1 and again.cached and again.gbps == first.gbps
    assert again.provenance == f"cached from {first.measured_utc} on this boot"
    assert (again.copy_bytes, again.cache_bytes) == (first.copy_bytes, first.cache_bytes)


def test_another_boot_measures_again_and_drops_the_old_boots_record(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    boot = tmp_path / "boot_id"
    monkeypatch.setattr(copycache, "BOOT_ID", str(boot))
    boot.write_text("11111111-2222-3333-4444-555555555555\n")
    copier = Copier(9.0)
    copycache.host_copy(dirs=[cache], measure=copier)
    boot.write_text("99999999-2222-3333-4444-555555555555\n")  # the machine restarted
    copier.gbps = 12.0
    after = copycache.host_copy(dirs=[cache], measure=copier)
    assert copier.calls == 2 and not after.cached and after.gbps == 12.0
    records = json.loads(_file(cache).read_text())["records"]
    assert [r["key"]["boot_id"] for r in records] == ["99999999-2222-3333-4444-555555555555"]
    boot.write_text("not a boot id\n")  # unreadable: measured every time, never kept
    unkept = copycache.host_copy(dirs=[cache], measure=copier)
    assert copier.calls == 3 and "no boot id" in unkept.note


def _record_for_this_boot(cache: Path, **changes: Any) -> dict[str, Any]:
    """The cache file as a run on this boot leaves it, with its one record changed."""
    copycache.host_copy(dirs=[cache], measure=Copier())
    document: dict[str, Any] = json.loads(_file(cache).read_text())
    document["records"][0].update(changes)
    return document


def _measured_again_after(cache: Path, data: bytes) -> None:
    """With `data` as this host's cache file: the copy is measured again, the file named in the
    figure's provenance, and replaced by a good one."""
    target = cache / copycache._file_name(socket.gethostname())
    target.write_bytes(data)
    copier = Copier(7.5)
    found = copycache.host_copy(dirs=[cache], measure=copier)
    assert copier.calls == 1 and not found.cached and found.gbps == 7.5
    assert found.provenance.startswith("measured (ignoring ") and str(target) in found.provenance
    assert copycache.host_copy(dirs=[cache], measure=copier).cached


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\xffnot json",
        b"[" * 50_000,  # nested past Python's recursion limit
        b'{"format": 1, "records": "x"}',
        b'{"format": 99, "records": []}',
        b" " * (copycache.MAX_BYTES + 1),
    ],
)
def test_a_corrupt_cache_file_is_ignored_and_the_copy_measured_again(cache: Path, data: bytes) -> None:
    cache.mkdir(mode=0o700)
    _measured_again_after(cache, data)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gbps", float("nan")),
        ("gbps", 1e9),
        ("gbps", True),
        ("gbps", "11"),
        ("measured_utc", "2999-01-01T00:00:00Z"),
        ("measured_utc", "yesterday"),
    ],
)
def test_an_implausible_record_of_this_boot_is_ignored(cache: Path, field: str, value: Any) -> None:
    _measured_again_after(cache, json.dumps(_record_for_this_boot(cache, **{field: value})).encode())


def test_a_linked_or_others_writable_cache_file_is_refused_and_replaced(cache: Path, tmp_path: Path) -> None:
    document = _record_for_this_boot(cache, gbps=99.0)
    target = _file(cache)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(document))
    target.unlink()
    target.symlink_to(elsewhere)
    copier = Copier(8.0)
    found = copycache.host_copy(dirs=[cache], measure=copier)
    assert copier.calls == 1 and found.gbps == 8.0 and "it is a symbolic link" in found.provenance
    assert not target.is_symlink() and json.loads(elsewhere.read_text()) == document  # the link's target untouched
    target.write_text(json.dumps(document))
    os.chmod(target, 0o666)
    found = copycache.host_copy(dirs=[cache], measure=copier)
    assert copier.calls == 2 and found.gbps == 8.0 and "other users can write to it" in found.provenance
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_cache_directory_others_can_write_is_passed_over(tmp_path: Path) -> None:
    open_dir, mine = tmp_path / "open", tmp_path / "mine"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    copier = Copier()
    found = copycache.host_copy(dirs=[open_dir, mine], measure=copier)
    assert "other users can write to it" in found.note and _file(mine) and not list(open_dir.iterdir())
    alone = copycache.host_copy(dirs=[open_dir], measure=copier)
    assert copier.calls == 2 and not alone.cached and "not kept: no cache directory of yours" in alone.note


def test_remeasure_measures_again_and_keeps_the_new_figure(cache: Path) -> None:
    copier = Copier(6.0)
    copycache.host_copy(dirs=[cache], measure=copier)
    copier.gbps = 13.0
    again = copycache.host_copy(remeasure=True, dirs=[cache], measure=copier)
    assert copier.calls == 2 and again.gbps == 13.0 and again.provenance == "measured (--remeasure-host-copy)"
    later = copycache.host_copy(dirs=[cache], measure=copier)
    assert copier.calls == 2 and later.cached and later.gbps == 13.0


def test_a_cached_limit_says_so_and_how_to_measure_it_again() -> None:
    cache = topology.last_level_cache_bytes()
    copy = topology.HostCopy(9.4, topology.probe_bytes(cache), cache, "2026-11-26T17:57:56Z", cached=True)
    limit, _ = limits.host_copy_limit(copy, copy.in_flight)
    assert limit is not None and limit.provenance == "cached from 2026-11-26T17:57:56Z on this boot"
    assert "cached from 2026-11-26T17:57:56Z on this boot; --remeasure-host-copy measures it again" in limit.detail
    assert limit.to_dict()["provenance"] == limit.provenance
    share, warning = limits.judge(9.4 * 1.3, limit)
    assert share is None and warning is not None and "--remeasure-host-copy" in warning
    fresh, _ = limits.host_copy_limit(topology.HostCopy(9.4, copy.copy_bytes, cache, "2026-11-26T17:57:56Z"), None)
    assert fresh is not None and fresh.to_dict()["provenance"] == "measured" and "cached" not in fresh.detail


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Three runs on a fresh cache directory: the first measures, the second takes its figure, the
    third (--remeasure-host-copy) measures again."""
    folder = tmp_path_factory.mktemp("copycache")
    env = rdmabench_env(RDMABENCH_CACHE_DIR=str(folder / "cache"))
    docs = []
    for index, extra in enumerate(([], [], ["--remeasure-host-copy"])):
        path = folder / f"r{index}.json"
        proc = run_cli(["run", "--np", "2", "--sizes", "8", *QUICK, *extra, "-o", str(path)], env=env)
        assert proc.returncode == 0, proc.stderr
        docs.append(load_results(str(path)))
    return docs


def test_a_run_records_where_its_host_copy_came_from(three_runs: list[dict[str, Any]]) -> None:
    copies = [next(t for t in doc["metadata"]["topology"] if t["host_copy_gbps"]) for doc in three_runs]
    first, second, third = copies
    assert first["host_copy_provenance"] == "measured" and first["host_copy_measured_utc"]
    assert second["host_copy_provenance"] == f"cached from {first['host_copy_measured_utc']} on this boot"
    assert second["host_copy_gbps"] == first["host_copy_gbps"]
    assert third["host_copy_provenance"] == "measured (--remeasure-host-copy)"
    assert three_runs[2]["metadata"]["config"]["remeasure_host_copy"] is True
    assert "remeasure_host_copy" not in three_runs[0]["metadata"]["config"]  # recorded only where a run sets it
    (entry,) = three_runs[1]["results"]  # 8 bytes run from the cache: the reason names the cached figure
    assert "cached from" in entry["link_limit_unknown"]
