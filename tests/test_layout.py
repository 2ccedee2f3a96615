"""The package's shape holds: layers import only downward, no function grows past a screen, and
building a configuration loads neither UCX nor the C loop."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "rdmabench"
# Lowest first: a module may import its own layer and the ones before it.
LAYERS = ["base", "hardware", "memory", "wire", "measure", "results", "job", "wings", "cli"]
WINGS = {"anchor", "copy", "storage"}  # the user commands of their own, on one floor
BASE = {"errors", "units", "stats", "modes", "escape", "userfiles", "privatedirs", "reaper", "__init__", "__version__"}
LONGEST = 60  # lines


def _layer(parts: list[str]) -> str:
    if parts[0] in BASE or (parts[0].endswith(".py") and parts[0][:-3] in BASE):
        return "base"
    if parts[0] in ("cli.py", "cli", "__main__.py", "__main__"):
        return "cli"
    return "wings" if parts[0] in WINGS else parts[0]


def _imports(path: Path) -> list[list[str]]:
    """Every rdmabench module this file imports, as package parts."""
    here = list(path.relative_to(PACKAGE).parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - node.level + 1]
            target = base + (node.module.split(".") if node.module else [])
            found.append(target or [alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rdmabench."):
            found.append(node.module.split(".")[1:])  # type: ignore[union-attr]
    return [parts for parts in found if parts]


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for path in PACKAGE.rglob("*.py"):
        mine = LAYERS.index(_layer(list(path.relative_to(PACKAGE).parts)))
        for target in _imports(path):
            theirs = LAYERS.index(_layer(target))
            if theirs > mine:
                upward.append(f"{path.relative_to(PACKAGE)} imports {'.'.join(target)}")
    assert upward == []


def test_no_function_is_longer_than_a_screen() -> None:
    long = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"  # type: ignore[operator]
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > LONGEST  # type: ignore[operator]
    ]
    assert long == []


def test_a_configuration_loads_neither_ucx_nor_the_c_loop() -> None:
    code = (
        "import sys; from rdmabench.job.config import RunConfig; RunConfig(test='bibw').check(); "
        "maps = open('/proc/self/maps').read(); "
        "print('ucxx' in sys.modules, 'libucp' in maps, 'hotloop' in maps)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "False"]


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its text: at the top, inside a function,
    or under TYPE_CHECKING (a cycle there is still two modules that need each other)."""
    modules = {_module(path): path for path in PACKAGE.rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets |= (
                    {known(f"{source}.{alias.name}") for alias in node.names}
                    if source.startswith("rdmabench")
                    else set()
                )
            elif isinstance(node, ast.Import):
                targets |= {known(alias.name) for alias in node.names if alias.name.startswith("rdmabench")}
        graph[name] = {target for target in targets if target and target != name}
    return graph


def test_the_import_graph_has_no_cycle() -> None:
    graph, cycles = _import_graph(), []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []
