"""The published JSON Schemas of results files, applied by the loader itself.

The files in schemas/ are the contract for every field of a results file. The loader does not keep a
second copy of it: every summary, profile, rank row and link record it reads (and each field of a
schema-1 entry, by the part of schema 2 it would be stored in) is checked here against those files,
by a small interpreter of the JSON Schema (draft 2020-12) keywords they use, so that the loader and
the schemas cannot disagree on a field. What one line of JSON cannot say (a record's profile exists,
its ranks are in the table, a bandwidth's bound depends on its profile's unit, figures that follow
from others) the loader checks beside this (reading.py), and the schemas' descriptions say so.

A JSON number is one number however it is spelled: an integer field takes 1048576.0, and this module
hands it on as the int 1048576. NaN and Infinity are not JSON; the loader refuses them as it parses.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from importlib import resources
from typing import Any, TypedDict, cast

from ...errors import ResultsFileError

SCHEMAS = ("results-summary-v2", "results-link-v2")
# The keywords this interpreter applies. A schema using any other is refused when loaded: a keyword
# jsonschema applies and the loader ignored would be a disagreement nobody sees.
KEYWORDS = frozenset(
    {
        *("$schema", "$id", "title", "description"),
        *("type", "properties", "required", "items", "minItems", "minLength", "const", "enum"),
        *("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "allOf", "if", "then"),
    }
)
_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (type(v) is float and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


# A schema as the published files write it: an object of the keywords this interpreter applies (KEYWORDS;
# a file using another is refused when compiled), or true (anything) or false (nothing).
SchemaObject = TypedDict(
    "SchemaObject",
    {
        "$schema": str,
        "$id": str,
        "title": str,
        "description": str,
        "type": "str | list[str]",
        "properties": "dict[str, Node]",
        "required": list[str],
        "items": "Node",
        "minItems": int,
        "minLength": int,
        "const": object,
        "enum": list[object],
        "minimum": float,
        "exclusiveMinimum": float,
        "maximum": float,
        "exclusiveMaximum": float,
        "allOf": "list[Node]",
        "if": "Node",
        "then": "Node",
    },
    total=False,
)
Node = SchemaObject | bool


def published(name: str) -> SchemaObject:
    """The published JSON Schema `name` (one of SCHEMAS), shipped in rdmabench/results/files/schemas/."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown schema {name!r}: choose one of {', '.join(SCHEMAS)}")
    text = resources.files(__package__).joinpath("schemas").joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    found = json.loads(text)
    if not isinstance(found, dict):
        raise ValueError(f"the published schema {name!r} is not a JSON object")
    return cast(SchemaObject, found)  # its keywords are checked as it is compiled (_walk)


class _Invalid(Exception):
    """A value that breaks its schema: where in it (keys and indexes) and what is wrong."""

    def __init__(self, path: tuple[Any, ...], problem: str):
        super().__init__(problem)
        self.path, self.problem = path, problem


def shown(value: Any) -> str:
    """A value as a message shows it: JSON, on one line, cut short."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


Check = Callable[[Any, tuple[Any, ...]], Any]  # (value, its path) -> the value, integral floats made ints


def compile_schema(node: Node) -> Check:
    """A function that checks a value against `node` (raising _Invalid) and returns it, with every
    integral float of an integer field made an int. A value the quick test passes (a million link
    records do) is returned as it is; any other is walked keyword by keyword, to name what is wrong."""
    quick, walk = _quick(node), _walk(node)
    return lambda value, path: value if quick(value) else walk(value, path)


def _walk(node: Node) -> Check:
    """The check of `node`, keyword by keyword."""
    if isinstance(node, bool):
        return (lambda value, path: value) if node else (lambda value, path: _raise(path, "is not allowed there"))
    unknown = set(node) - KEYWORDS
    if unknown:
        raise ValueError(f"the results schema uses {', '.join(sorted(unknown))}, which the loader does not apply")
    steps = [_type_step(node)] if "type" in node else []
    steps += [step for step in (_value_step(node), _bounds_step(node)) if step is not None]
    steps += _container_steps(node)
    if "allOf" in node:
        parts = [_walk(part) for part in node["allOf"]]
        steps.append(lambda value, path: _all(parts, value, path))
    if "if" in node and "then" in node:
        when, then = _walk(node["if"]), _walk(node["then"])
        steps.append(lambda value, path: then(value, path) if _holds(when, value) else value)

    def check(value: Any, path: tuple[Any, ...]) -> Any:
        for step in steps:
            value = step(value, path)
        return value

    return check


# Python types that are exactly a JSON type (an integral float is an integer too: the walk takes it).
_EXACT: dict[str, tuple[str, ...]] = {
    "null": ("NoneType",),
    "boolean": ("bool",),
    "integer": ("int",),
    "number": ("int", "float"),
    "string": ("str",),
    "array": ("list",),
    "object": ("dict",),
}
# Each bound: how the walk tests it, how the quick test writes it, and how a message says it failed.
_BOUNDS: dict[str, tuple[Callable[[Any, Any], bool], str, str]] = {
    "minimum": (operator.ge, ">=", "below its minimum"),
    "exclusiveMinimum": (operator.gt, ">", "not above"),
    "maximum": (operator.le, "<=", "above its maximum"),
    "exclusiveMaximum": (operator.lt, "<", "not below"),
}
_QUICK_KEYWORDS = frozenset(
    {"$schema", "$id", "title", "description", "type", "properties", "required", "items", "minItems", "minLength"}
    | set(_BOUNDS)
)
_MISSING = object()


def _quick(node: Node) -> Callable[[Any], bool]:
    """A test that passes only values `node` allows as they are (exact types, no integral float to
    make an int), written out as one Python function: a link record takes a few microseconds, not
    a call per field. A node it cannot judge quickly (const, enum, allOf, if) fails it, and the walk
    decides."""
    lines = ["def quick(value):", *_quick_lines(node, "value", 1, iter(range(1000))), "    return True"]
    namespace: dict[str, object] = {"NoneType": type(None), "_MISSING": _MISSING}
    exec(compile("\n".join(lines), "<results schema>", "exec"), namespace)  # the source: the lines above
    return cast("Callable[[Any], bool]", namespace["quick"])  # the function the lines define


def _quick_lines(node: Node, name: str, depth: int, names: Any) -> list[str]:
    """Lines that return False unless the value in variable `name` meets `node` as it is."""
    pad = "    " * depth
    if node is True:
        return [f"{pad}pass"]
    if node is False or "type" not in node or not set(node) <= _QUICK_KEYWORDS:
        return [f"{pad}return False"]
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    exact = [t for kind in types for t in _EXACT[kind]]
    kind = f"t{next(names)}"
    lines = [
        f"{pad}{kind} = type({name})",
        f"{pad}if {' and '.join(f'{kind} is not {t}' for t in exact)}:",
        f"{pad}    return False",
    ]

    def only(*wanted: str) -> str:  # a condition on the type, needless where the type is all it can be
        return "" if set(exact) <= set(wanted) else f"({' or '.join(f'{kind} is {t}' for t in wanted)}) and "

    bounds = [f"{name} {spelled} {node.get(key)!r}" for key, (_, spelled, _) in _BOUNDS.items() if key in node]
    if bounds:
        lines += [f"{pad}if {only('int', 'float')}not ({' and '.join(bounds)}):", f"{pad}    return False"]
    if "minLength" in node:
        lines += [f"{pad}if {only('str')}len({name}) < {node['minLength']}:", f"{pad}    return False"]
    if "required" in node or "properties" in node:
        lines += [f"{pad}if {only('dict')}True:", *_object_lines(node, name, depth + 1, names)]
    if "items" in node or "minItems" in node:
        lines += [f"{pad}if {only('list')}True:", *_array_lines(node, name, depth + 1, names)]
    return lines


def _object_lines(node: SchemaObject, name: str, depth: int, names: Any) -> list[str]:
    pad, required = "    " * depth, list(node.get("required", ()))
    lines = [f"{pad}if not {{{', '.join(map(repr, required))}}} <= {name}.keys():", f"{pad}    return False"]
    for key, sub in node.get("properties", {}).items():
        field = f"v{next(names)}"
        if key in required:  # there: read it
            lines += [f"{pad}{field} = {name}[{key!r}]", f"{pad}if True:"]
        else:
            lines += [f"{pad}{field} = {name}.get({key!r}, _MISSING)", f"{pad}if {field} is not _MISSING:"]
        lines += _quick_lines(sub, field, depth + 1, names)
    return lines if required else lines[2:] or [f"{pad}pass"]


def _array_lines(node: SchemaObject, name: str, depth: int, names: Any) -> list[str]:
    pad = "    " * depth
    lines = [f"{pad}if len({name}) < {node.get('minItems', 0)}:", f"{pad}    return False"]
    item = node.get("items")
    if item is None:
        return lines
    if (
        isinstance(item, dict)
        and item.get("type") == "number"
        and set(item) <= _QUICK_KEYWORDS - {"properties", "items", "required"}
    ):
        # Samples: the types and the two ends of the list, a few calls in C (an interval holds all
        # between its ends).
        ends = [f"v{next(names)}", f"v{next(names)}"]
        lines += [
            f"{pad}if {name}:",
            f"{pad}    if not {{*map(type, {name})}} <= {{int, float}}:",
            f"{pad}        return False",
            f"{pad}    {ends[0]}, {ends[1]} = min({name}), max({name})",
        ]
        for end in ends:
            lines += _quick_lines(item, end, depth + 1, names)
        return lines
    each = f"v{next(names)}"
    return [*lines, f"{pad}for {each} in {name}:", *_quick_lines(item, each, depth + 1, names)]


def _all(parts: list[Check], value: Any, path: tuple[Any, ...]) -> Any:
    for part in parts:
        value = part(value, path)
    return value


def _holds(check: Check, value: Any) -> bool:
    """Whether `value` meets a schema (an `if`), leaving it as it is."""
    try:
        check(json.loads(json.dumps(value)), ())
    except _Invalid:
        return False
    return True


_SPOKEN = {
    "null": "null",
    "boolean": "true or false",
    "integer": "a whole number",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "an object",
}


def _type_step(node: SchemaObject) -> Check:
    names = node["type"] if isinstance(node["type"], list) else [node["type"]]
    tests = [_TYPES[name] for name in names]
    integral = "integer" in names and "number" not in names
    wanted = " or ".join(_SPOKEN[name] for name in names)

    def typed(value: Any, path: tuple[Any, ...]) -> Any:
        if not any(test(value) for test in tests):
            raise _Invalid(path, f"is {shown(value)}, not {wanted}")
        return int(value) if integral and type(value) is float else value

    return typed


def _value_step(node: SchemaObject) -> Check | None:
    if "const" in node:
        allowed = [node["const"]]
    elif "enum" in node:
        allowed = list(node["enum"])
    else:
        return None
    names = " or ".join(shown(v) for v in allowed)

    def one_of(value: Any, path: tuple[Any, ...]) -> Any:
        if not any(_equal(value, choice) for choice in allowed):
            raise _Invalid(path, f"is {shown(value)}, not {names}")
        return value

    return one_of


def _equal(one: Any, two: Any) -> bool:
    """JSON equality, as `const` and `enum` mean it: true is not 1, and 2.0 is 2."""
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    if isinstance(one, (int, float)) and isinstance(two, (int, float)):
        return one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(_equal, one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(_equal(one[k], two[k]) for k in one)
    return type(one) is type(two) and one == two


def _bounds_step(node: SchemaObject) -> Check | None:
    bounds = [(holds, words, node.get(key)) for key, (holds, _, words) in _BOUNDS.items() if key in node]
    if not bounds:
        return None

    def bounded(value: Any, path: tuple[Any, ...]) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for holds, words, bound in bounds:
                if not holds(value, bound):
                    raise _Invalid(path, f"is {shown(value)}: {words} {bound:g}")
        return value

    return bounded


def _container_steps(node: SchemaObject) -> list[Check]:
    steps: list[Check] = []
    if "minLength" in node:
        shortest = node["minLength"]
        steps.append(lambda v, p: _raise(p, f"is {shown(v)}: shorter than {shortest}") if _short(v, shortest) else v)
    if "minItems" in node:
        fewest = node["minItems"]
        steps.append(lambda v, p: _raise(p, f"holds fewer than {fewest} item(s)") if _few(v, fewest) else v)
    if "required" in node:
        required = list(node["required"])
        steps.append(lambda v, p: _required(required, v, p))
    if "properties" in node:
        fields = {key: _walk(sub) for key, sub in node["properties"].items()}
        steps.append(lambda v, p: _properties(fields, v, p))
    if "items" in node:
        item = _walk(node["items"])
        steps.append(lambda v, p: _items(item, v, p))
    return steps


def _raise(path: tuple[Any, ...], problem: str) -> Any:
    raise _Invalid(path, problem)


def _short(value: Any, shortest: int) -> bool:
    return isinstance(value, str) and len(value) < shortest


def _few(value: Any, fewest: int) -> bool:
    return isinstance(value, list) and len(value) < fewest


def _required(required: list[str], value: Any, path: tuple[Any, ...]) -> Any:
    if isinstance(value, dict):
        missing = [key for key in required if key not in value]
        if missing:
            raise _Invalid(path, f"lacks {', '.join(missing)}")
    return value


def _properties(fields: dict[str, Check], value: Any, path: tuple[Any, ...]) -> Any:
    if isinstance(value, dict):
        for key, check in fields.items():
            if key in value:
                old = value[key]
                new = check(old, (*path, key))
                if new is not old:
                    value[key] = new
    return value


def _items(item: Check, value: Any, path: tuple[Any, ...]) -> Any:
    if isinstance(value, list):
        for index, old in enumerate(value):
            new = item(old, (*path, index))
            if new is not old:
                value[index] = new
    return value


def _where(path: tuple[Any, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


def checker(node: Node, what: str) -> Callable[[Any, str], Any]:
    """check(value, where): `value` as `node` allows it (integral floats of integer fields made
    ints), or ResultsFileError in one line: where, that it is not `what`, the field and the fault."""
    compiled = compile_schema(node)

    def check(value: Any, where: str) -> Any:
        try:
            return compiled(value, ())
        except _Invalid as exc:
            raise ResultsFileError(f"{where} is not {what}: {_where(exc.path) or 'it'} {exc.problem}") from None

    return check


def fields(node: SchemaObject) -> dict[str, Check]:
    """The compiled check of each property `node` lists (a schema-1 entry is checked field by field)."""
    return {key: compile_schema(sub) for key, sub in node.get("properties", {}).items()}


def check_field(check: Check, value: Any, name: str, where: str) -> Any:
    """`value` of the field `name` as `check` allows it, or ResultsFileError naming it."""
    try:
        return check(value, (name,))
    except _Invalid as exc:
        raise ResultsFileError(f"{where}.{_where(exc.path)} {exc.problem}") from None


class Parts:
    """The checks of each part of a schema-2 result, compiled once from the published files."""

    def __init__(self) -> None:
        summary, link = (published(name) for name in SCHEMAS)
        parts = summary.get("properties", {})
        profile = _object(_object(parts.get("profiles"), "profiles").get("items"), "a profile")
        rank = _object(_object(parts.get("ranks"), "ranks").get("items"), "a rank's row")
        self.summary = checker(summary, "a results summary")
        self.metadata = checker(_object(parts.get("metadata"), "metadata"), "the metadata of a result")
        self.profile = checker(profile, "a profile of a result")
        self.rank = checker(rank, "a row of a ranks table")
        self.link = checker(link, "a link record")
        self.profile_fields = fields(profile)
        self.rank_fields = fields(rank)
        self.link_fields = fields(link)


def _object(node: Node | None, what: str) -> SchemaObject:
    """The object schema of `what` in the published summary schema (ValueError where it is none)."""
    if not isinstance(node, dict):
        raise ValueError(f"the published results schema has no object schema for {what}")
    return node


_parts: list[Parts] = []


def parts() -> Parts:
    """The compiled checks (compiled on first use: importing the package reads no schema)."""
    if not _parts:
        _parts.append(Parts())
    return _parts[0]


def not_json(name: str) -> Any:
    """For json.loads' parse_constant: NaN and Infinity are not JSON (RFC 8259), and a results file
    is JSON: every schema's number is a finite one."""
    raise ValueError(f"{name} is not a JSON number")


# A record's deepest value (a block list's percentiles) is 3 deep, and a stream line's 4: nothing
# rdmabench writes comes near this. Deeper is refused before parsing, since json and the checks
# here recurse once a level (100,000 brackets were a RecursionError).
MAX_NESTING = 32


def too_deep(line: str, limit: int = MAX_NESTING) -> bool:
    """Whether the JSON text `line` nests arrays and objects more than `limit` deep. A line of few
    brackets (every line rdmabench writes) is answered by two counts in C; only others are scanned."""
    if line.count("[") + line.count("{") <= limit:
        return False
    depth, in_string, escaped = 0, False, False
    for char in line:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False
