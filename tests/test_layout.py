"""The package's shape holds: layers import only downward (and, inside a layer, its rooms and protocols
keep to theirs), no function grows past a screen, building a configuration loads neither UCX nor the
C loop, and the wheel carries nothing only a developer runs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rdmabench"
DEVTOOLS = ROOT / "devtools"  # developer harnesses: run from a checkout, never installed
# Lowest first: a module may import its own layer and the ones before it.
LAYERS = ["base", "hardware", "memory", "wire", "measure", "results", "job", "wings", "cli"]
BASE = {
    "errors", "units", "stats", "modes", "escape", "userfiles", "privatedirs", "pystart", "reaper", "__init__",
    "__version__",
}  # fmt: skip
WINGS = {"anchor", "copy", "storage"}  # the user commands of their own, on one floor, none importing another
# results/ in rooms, lowest first: the verdicts (the diagnosis) read rows and never the report; the
# reports print the verdicts' suspects.
ROOMS = ["files", "verdicts", "reports"]
# What a step protocol (a module with a class that has a native_step) may import from measure/: the
# contract and the need it returns, the planted faults, the block-list shape, the posting paths and the
# block-list record. Memory, wire and the base
# are open to it; the engine (round, entry, plan, registry, the kinds) and the other protocols are not.
PROTOCOL_MAY = {"contract", "need", "faults", "blocks", "postings", "blockrecord"}
# Imports between protocols that exist and are needed, each with why.
PROTOCOL_EXCEPTIONS = {
    ("blocksteps", "onesided"): "block lists posted as puts and gets lend and borrow memory as the one-sided "
    "protocol does (lend_and_borrow, native_loop, OPERATIONS): one registration path, not two",
}
LONGEST = 60  # lines of a function, its decorators included (C and CUDA: its header to its closing brace)
LONGEST_MODULE = 600  # lines of a source file: Python, C, CUDA, their headers
# Where the size rules hold, besides the top-level files (setup.py): the whole tree's own source.
TREE = ("rdmabench", "devtools", "tests", "launch", "measurements")
C_SUFFIXES = (".c", ".h", ".cu", ".cuh")
# C and CUDA functions over LONGEST, each on a branch that splits it: the list only shrinks, and the test
# fails when one of them is split and still listed here (empty since the ce-armed branch split
# devlists.cu's rb_dev_plan_create and rb_dev_step).
LONG_C_FUNCTIONS: dict[str, str] = {}
# Over the limit, each to be split (empty since issue 37: a module that grows past it is split, not listed).
SPLITTING: set[str] = set()


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


def _lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines with its decorators: a command's option declarations are part of it."""
    first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    return node.end_lineno - first + 1  # type: ignore[operator]


def _room_of(parts: list[str]) -> int | None:
    """The index of a results module's room (ROOMS), None outside results/."""
    if len(parts) < 2 or parts[0] != "results" or parts[1] == "__init__.py":
        return None
    return ROOMS.index(parts[1].removesuffix(".py"))


def test_results_rooms_import_only_their_own_and_the_rooms_before() -> None:
    upward = []
    for path in (PACKAGE / "results").rglob("*.py"):
        mine = _room_of(list(path.relative_to(PACKAGE).parts))
        for target in _imports(path):
            theirs = _room_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{path.relative_to(PACKAGE)} imports {'.'.join(target)}")
    assert sorted(p.name for p in (PACKAGE / "results").iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(
        ROOMS
    )
    assert upward == []


def test_no_wing_imports_another() -> None:
    across = [
        f"{path.relative_to(PACKAGE)} imports {'.'.join(target)}"
        for wing in WINGS
        for path in (PACKAGE / wing).rglob("*.py")
        for target in _imports(path)
        if target[0] in WINGS and target[0] != wing
    ]
    assert across == []


def _protocol_modules() -> dict[str, Path]:
    """Every module that defines a step protocol: a class with a native_step (not the contract's)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name != "StepProtocol":
                if any(isinstance(item, ast.FunctionDef) and item.name == "native_step" for item in node.body):
                    found[path.stem] = path
    return found


def _modules_imported(path: Path) -> list[list[str]]:
    """_imports, with `from PACKAGE import a, b` as the modules a and b."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            here = list(path.relative_to(PACKAGE).parts[:-1])
            target = here[: len(here) - node.level + 1] + (node.module.split(".") if node.module else [])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rdmabench."):
            target = node.module.split(".")[1:]  # type: ignore[union-attr]
        else:
            continue
        if PACKAGE.joinpath(*target).is_dir():
            found += [[*target, alias.name] for alias in node.names]
        elif target:
            found.append(target)
    return found


def test_protocols_import_the_contract_memory_and_wire_never_each_other_or_the_engine() -> None:
    protocols = _protocol_modules()
    assert {"window", "pingpong", "onesided"} <= set(protocols)  # the rule finds what it is about
    wrong = []
    for name, path in protocols.items():
        for target in _modules_imported(path):
            layer, module = _layer(target), target[-1].removesuffix(".py")
            if layer in ("base", "memory", "wire") or (layer == "measure" and module in PROTOCOL_MAY):
                continue
            if (name, module) not in PROTOCOL_EXCEPTIONS:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {'.'.join(target)}")
    assert wrong == []


def _tree(*suffixes: str) -> list[Path]:
    """The tree's own source files with these suffixes: the package, the developer harnesses, the
    tests, the launch scripts, the measurements' scripts and the top-level ones (setup.py)."""
    found = [path for suffix in suffixes for path in ROOT.glob(f"*{suffix}")]
    for folder in TREE:
        found += [path for suffix in suffixes for path in (ROOT / folder).rglob(f"*{suffix}")]
    return sorted(found)


# A C or CUDA function: a line at the first column naming it before its parameters (not a statement,
# a prototype, a macro or a type), its body from the first brace to the one that closes it.
_C_HEADER = re.compile(r"^(?!(?:typedef|struct|enum|union|return|if|for|while|switch|do|else)\b)[A-Za-z_][^;=#]*\(")
_C_NAME = re.compile(r"(\w+)\s*\(")
_C_ATTRIBUTES = {"__launch_bounds__", "__attribute__", "__declspec", "alignas"}  # before a name, not one
_C_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def c_functions(text: str) -> list[tuple[str, int, int]]:
    """Each function of a C or CUDA source, roughly, by brace matching: (name, the line naming it, lines
    from there to its closing brace). Comments and literals are blanked first (their braces do not
    count); the line count stays that of the source."""
    lines = _C_NOISE.sub(lambda match: "\n" * match.group(0).count("\n"), text).splitlines()
    found, index = [], 0
    while index < len(lines):
        header = _C_HEADER.match(lines[index])
        opened = index
        while header and opened < len(lines) and "{" not in lines[opened] and ";" not in lines[opened]:
            opened += 1
        if not header or opened == len(lines) or "{" not in lines[opened]:
            index += 1
            continue
        depth, end = 0, opened
        for end in range(opened, len(lines)):
            depth += lines[end].count("{") - lines[end].count("}")
            if depth <= 0:
                break
        name = next(word for word in _C_NAME.findall(lines[index]) if word not in _C_ATTRIBUTES)
        found.append((name, index + 1, end - index + 1))
        index = end + 1
    return found


def test_no_function_is_longer_than_a_screen() -> None:
    """Python with its decorators, C and CUDA from the header to the closing brace, over the whole tree."""
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({_lines(node)} lines)"
        for path in _tree(".py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _lines(node) > LONGEST
    ]
    long_c = {
        f"{path.relative_to(ROOT)}:{name}": count
        for path in _tree(*C_SUFFIXES)
        for name, _line, count in c_functions(path.read_text())
        if count > LONGEST
    }
    assert long == []
    # The list of known offenders only shrinks: a function split is taken off it here.
    assert long_c.keys() == LONG_C_FUNCTIONS.keys(), long_c


def test_the_c_function_finder_counts_what_it_should() -> None:
    """The finder the size rule reads: a function's lines from its header to its brace, a brace in a
    comment or a string not counted, prototypes and types no function."""
    text = (
        "/* a { comment */\ntypedef struct {\n    int a;\n} pair;\nint declared(int x);\n"
        'static int\nwide(int a,\n     int b)\n{\n    const char *s = "}";\n    if (a) {\n        return b;\n    }\n'
        "    return '{';\n}\n__global__ void __launch_bounds__(128) kernel(int *x)\n{\n    x[0] = 1;\n}\n"
    )
    assert c_functions(text) == [("wide", 7, 9), ("kernel", 16, 4)]


def test_no_source_file_is_longer_than_600_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)} ({count} lines)"
        for path in _tree(".py", *C_SUFFIXES)
        if (count := len(path.read_text().splitlines())) > LONGEST_MODULE
        and path.relative_to(PACKAGE if path.is_relative_to(PACKAGE) else ROOT).as_posix() not in SPLITTING
    ]
    assert long == []


def test_a_configuration_loads_neither_ucx_nor_the_c_loop() -> None:
    code = (
        "import sys; from rdmabench.job.config import RunConfig; RunConfig.from_options({'test': 'bibw'}); "
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


def test_the_wheel_carries_no_developer_harness_and_its_data() -> None:
    """What `pip install .` ships: the packages pyproject's find rule takes (rdmabench*, not devtools)
    and, for each package-data entry, a package that exists with files its patterns match."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    find_packages = pytest.importorskip("setuptools").find_packages
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = set(find_packages(str(ROOT), include=config["packages"]["find"]["include"]))
    assert "rdmabench" in shipped and not any(name.startswith(("devtools", "tests")) for name in shipped)
    assert (DEVTOOLS / "million.py").is_file() and not (PACKAGE / "bench").exists()
    for package, patterns in config["package-data"].items():
        assert package in shipped, package
        folder = ROOT.joinpath(*package.split("."))
        assert all(list(folder.glob(pattern)) for pattern in patterns), (package, patterns)


def test_records_stay_typed() -> None:
    """Issue 43's ceilings, held: at most 120 `dict[str, Any]` in the package (341 when it was filed, 95
    after its records were typed) and at most 30 fields on an entry (54 then): a new record gets a type
    of its own, not an open dict, and a new figure goes into its protocol's record, not the entry."""
    import dataclasses

    from rdmabench.measure.entryrecord import Entry

    count = sum(path.read_text().count("dict[str, Any]") for path in PACKAGE.rglob("*.py"))
    assert count <= 120, f"dict[str, Any] appears {count} times in the package (at most 120)"
    assert len(dataclasses.fields(Entry)) <= 30, [f.name for f in dataclasses.fields(Entry)]
