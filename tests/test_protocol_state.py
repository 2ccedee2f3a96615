"""Each step protocol keeps its own typed state between steps (contract.state_of), never string keys
in a dict the engine shares: the engine holds the record and never reads it."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from rdmabench.measure import blocksteps, onesided, pingpong, window
from rdmabench.measure.contract import state_of

PROTOCOLS = [window, pingpong, onesided, blocksteps]


@dataclass
class _Mine:
    steps: int = 0


@dataclass
class _Other:
    pass


class _End:
    """The two fields of a RoundEnd that state_of reads."""

    def __init__(self, state: object) -> None:
        self.state = state
        self.where = "round 1 (0->1, 8 B)"


def test_state_of_gives_the_protocols_own_record_typed() -> None:
    mine = _Mine()
    found = state_of(_End(mine), _Mine)  # type: ignore[arg-type]
    found.steps += 1
    assert found is mine and mine.steps == 1


@pytest.mark.parametrize("state", [None, _Other(), {"loop": 1}])
def test_state_of_refuses_another_protocols_state_naming_the_round(state: object) -> None:
    with pytest.raises(TypeError, match=r"round 1 \(0->1, 8 B\): the protocol's state is \w+, not _Mine"):
        state_of(_End(state), _Mine)  # type: ignore[arg-type]


def _is_state(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "state") or (
        isinstance(node, ast.Attribute) and node.attr == "state"
    )


@pytest.mark.parametrize("module", PROTOCOLS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_no_protocol_reads_or_writes_state_by_string_key(module: object) -> None:
    """`end.state` is only assigned a record and read through state_of: no `state[...]`, no
    `state.get/setdefault/update` (the old shared dict's string keys)."""
    tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
    keyed = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if (isinstance(node, ast.Subscript) and _is_state(node.value))
        or (isinstance(node, ast.Attribute) and node.attr in {"get", "setdefault", "update"} and _is_state(node.value))
    ]
    assert not keyed, keyed
