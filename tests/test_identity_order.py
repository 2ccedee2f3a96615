"""Which files are one run (results/files/identity.py) does not depend on the order they are given in
(review9): two files of one run id with different records are a conflict, and a third file under another
run id holding one side's records was folded into that conflict when it came last (listed under a run id
it does not name) and counted as the run, the conflict's other side with it, when it came first. The
documents are GENERATED: schema-1 entries, as a results stream holds them."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rdmabench.results.files.identity import Conflict, distinct


def _doc(run: str, figure: float) -> dict[str, Any]:
    return {"metadata": {"run_id": run}, "results": [{"src_rank": 0, "dst_rank": 1, "bandwidth_gbps": figure}]}


FILES = {
    "a.json": _doc("x" * 32, 10.0),  # run x ...
    "b.json": _doc("x" * 32, 99.0),  # ... with other records: a conflict
    "c.json": _doc("y" * 32, 10.0),  # a's records under another run id
    "d.json": _doc("z" * 32, 50.0),  # a run of its own
}


@pytest.mark.parametrize("order", list(itertools.permutations(FILES)))
def test_a_copy_of_a_conflicts_side_under_another_run_id_is_no_run_in_any_order(order: tuple[str, ...]) -> None:
    kept, duplicates, problems, conflicts = distinct([(path, FILES[path]) for path in order])
    assert [path for path, _doc in kept] == ["d.json"]
    assert not duplicates
    assert [(c.run_id, sorted(c.paths)) for c in conflicts] == [("x" * 32, ["a.json", "b.json"])]
    (said,) = problems
    assert said.startswith("c.json: the same records as a.json, a file of the run id " + "x" * 32)


@pytest.mark.parametrize("order", list(itertools.permutations(["a.json", "c.json", "d.json"])))
def test_without_a_conflict_a_copy_under_another_run_id_is_counted_once(order: tuple[str, ...]) -> None:
    kept, duplicates, problems, conflicts = distinct([(path, FILES[path]) for path in order])
    first = next(path for path in order if path in ("a.json", "c.json"))
    assert sorted(path for path, _doc in kept) == sorted([first, "d.json"])
    assert [d.path for d in duplicates] == [{"a.json": "c.json", "c.json": "a.json"}[first]]
    assert not problems and conflicts == []


def test_a_conflict_is_said_once_with_its_files_in_the_order_given() -> None:
    _kept, _duplicates, _problems, conflicts = distinct([(path, FILES[path]) for path in ("b.json", "a.json")])
    assert conflicts == [Conflict("x" * 32, ("b.json", "a.json"))]
