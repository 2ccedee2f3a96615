"""The loader and the published JSON Schemas agree, both ways, on every field; figures that follow
from others are recomputed on load, never trusted.

The explicit cases are the disagreements found by hand (issue 30). The property test generates
whole schema-2 results field by field from the schemas' own types (valid ones, then one field
mutated to any JSON value) and holds: the loader accepts a result exactly when jsonschema validates
its summary and every line and the rules one line of JSON cannot state hold (the schemas'
descriptions give them: `relational_problems` below). Real files: tests/data/schema/README.md.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdmabench.errors import ResultsFileError
from rdmabench.measure import registry
from rdmabench.results.files import compact, document, schema
from rdmabench.results.files.rows import aggregate

from .conftest import run_cli_here

DATA = Path(__file__).resolve().parent / "data" / "schema"
SUMMARY, LINK = (document.json_schema(name) for name in document.SCHEMAS)
SUMMARY_CHECK, LINK_CHECK = jsonschema.Draft202012Validator(SUMMARY), jsonschema.Draft202012Validator(LINK)
Result = tuple[dict[str, Any], list[dict[str, Any]]]


def real(name: str) -> Result:
    """A copy of the real result `name` in tests/data/schema: its summary and link records."""
    summary = json.loads((DATA / f"{name}.json").read_text())
    lines = (DATA / summary["links"]["file"]).read_text().splitlines()
    summary["links"]["file"] = "r.links.jsonl"  # as `write` names it
    return summary, [json.loads(line) for line in lines]


def write(directory: Path, summary: dict[str, Any], links: list[Any]) -> Path:
    """The result as r.json beside r.links.jsonl (whatever the summary names: a mutation may change it)."""
    path = directory / "r.json"
    path.write_text(json.dumps(summary))
    (directory / "r.links.jsonl").write_text("".join(json.dumps(line) + "\n" for line in links))
    return path


def schema_errors(summary: Any, links: list[Any]) -> list[str]:
    found = [e.message for e in SUMMARY_CHECK.iter_errors(summary)]
    for line in links:
        found += [e.message for e in LINK_CHECK.iter_errors(line)]
    return found


def loaded(path: Path) -> str | None:
    """None if the loader accepts the result both ways it reads one (every entry expanded, and a
    report's pass over its ordinary records), else its one-line error. Anything but a
    ResultsFileError is a failure of the test."""
    outcomes = []
    for read in (
        lambda: document.load(str(path)),
        lambda: aggregate([(str(path), document.load(str(path), True))]),
    ):
        try:
            read()
            outcomes.append(None)
        except ResultsFileError as exc:
            assert "\n" not in str(exc), str(exc)
            outcomes.append(str(exc))
    assert (outcomes[0] is None) == (outcomes[1] is None), outcomes  # both ways of reading agree
    return outcomes[0]


# --- the disagreements found by hand -------------------------------------------------------------


def _set(part: str, key: str, value: Any) -> Callable[[Result], None]:
    def mutate(result: Result) -> None:
        summary, links = result
        target = {"link": links[0], "rank": summary["ranks"][0], "profile": summary["profiles"][0]}[part]
        target[key] = value(target[key]) if callable(value) else value

    return mutate


REFUSED_BY_BOTH = {
    "a negative profile index": _set("link", "profile", -1),
    "no steps per sample": _set("link", "iterations", 0),
    "a negative share": _set("link", "share", -3),
    "a host that is not a string": _set("rank", "host", 5),
    "a window of a string (a message count is a number)": _set("profile", "window", "64"),
    "a CPU cost that is not a number": _set("link", "cpu", {"src": "fast", "dst": 1.0}),
    "an aggregate that is no figure": _set("link", "agg", -1.0),
    "a latency unit for a bandwidth test": _set("profile", "unit", "us"),
}


@pytest.mark.parametrize("mutation", sorted(REFUSED_BY_BOTH))
def test_what_the_schema_refuses_the_loader_refuses(tmp_path: Path, mutation: str) -> None:
    summary, links = real("bibw")
    REFUSED_BY_BOTH[mutation]((summary, links))
    assert schema_errors(summary, links), f"the schema accepts {mutation}"
    assert loaded(write(tmp_path, summary, links)) is not None, f"the loader accepts {mutation}"


REFUSED_AS_DAMAGED = {  # (what the last record is made to hold, the words of its refusal)
    "a size of 10^30 bytes": ({"size": 10**30}, "above its maximum"),
    "one rank at both ends": ({"dst": "src"}, "src and dst are both rank"),
    "a block list in a run without one": ({"blocks": {"count": 4}}, "a block list's record in a run without block"),
    "a load beside in a run without one": ({"beside": {"load": "gemm:8192"}}, "beside the link in a run without"),
}


@pytest.mark.parametrize("damage", sorted(REFUSED_AS_DAMAGED))
def test_a_record_no_run_writes_is_refused_as_damaged(tmp_path: Path, damage: str) -> None:
    """The loader took them (issue 55): a size no message has, a link from a rank to itself, and a
    block list's or a load's record in a run whose configuration had neither. The last record is
    damaged, so a report's pass over ordinary records meets it after its profile is known."""
    summary, links = real("allpairs-bw")
    assert loaded(write(tmp_path, summary, links)) is None
    fields, words = REFUSED_AS_DAMAGED[damage]
    links[-1].update({k: links[-1][v] if v in ("src", "dst") else v for k, v in fields.items()})
    problem = loaded(write(tmp_path, summary, links))
    assert problem is not None and words in problem and f"line {len(links)}" in problem, problem
    assert relational_problems(summary, links) or schema_errors(summary, links)


def test_an_integral_float_is_the_integer_it_spells(tmp_path: Path) -> None:
    """1048576.0 is the JSON number 1048576: the schema takes it, so the loader does, as an int."""
    summary, links = real("bibw")
    links[2]["size"] = 1048576.0
    summary["ranks"][0]["rank"] = 0.0
    assert links[2]["size"] == 1 << 20 and schema_errors(summary, links) == []
    path = write(tmp_path, summary, links)
    assert loaded(path) is None
    sizes = [entry["size_bytes"] for entry in document.load(str(path))["results"]]
    assert sizes == [4096, 4096, 1 << 20, 1 << 20] and all(type(size) is int for size in sizes)


def test_a_real_latency_over_tcp_at_512_mib_follows_its_own_schema() -> None:
    """461 ms for half a round trip of 512 MiB over TCP: a time has no upper bound but a finite one."""
    summary, links = real("lat512")
    assert links[0]["value"] > 1e5 and summary["profiles"][0]["unit"] == "us"
    assert schema_errors(summary, links) == []
    assert loaded(DATA / "lat512.json") is None


def test_nan_is_not_json(tmp_path: Path) -> None:
    summary, links = real("lat")
    path = write(tmp_path, summary, links)
    text = (tmp_path / "r.links.jsonl").read_text()
    (tmp_path / "r.links.jsonl").write_text(text.replace('"round_s":', '"round_s": NaN, "x":', 1))
    assert "NaN is not a JSON number" in str(loaded(path))


def test_a_profile_past_the_end_is_named(tmp_path: Path) -> None:
    summary, links = real("bibw")
    links[1]["profile"] = 7
    assert schema_errors(summary, links) == []  # one line cannot know how many profiles there are
    assert "profile 7 is not among the summary's 2 profiles" in str(loaded(write(tmp_path, summary, links)))


def test_a_plugin_test_is_held_to_its_own_record(tmp_path: Path) -> None:
    """A test the schema cannot list (a plugin's) is held to the registry's record of it; one this
    process has no record of is read only by a figure field rdmabench knows, else refused by name."""
    from .test_registry import RTIME  # registered by importing it, as $RDMABENCH_PLUGINS would

    summary, links = real("lat")
    profile = summary["profiles"][0]
    profile.update(test=RTIME.name, _figure=RTIME.field, unit=RTIME.unit)
    assert schema_errors(summary, links) == [] and loaded(write(tmp_path, summary, links)) is None
    profile["unit"] = "us"
    assert schema_errors(summary, links) == []
    assert 'a rtime result in "us" under "time_per_mib_us": the test measures time_per_mib_us in us/MiB' in str(
        loaded(write(tmp_path, summary, links))
    )
    profile.update(test="not-loaded", unit="us/MiB")
    assert schema_errors(summary, links) == []
    assert "RDMABENCH_PLUGINS" in str(loaded(write(tmp_path, summary, links)))


def test_the_schema_holds_every_built_in_test_to_its_unit() -> None:
    """The schema's rules for the built-in tests list exactly the registry's, field and unit."""
    rules = SUMMARY["properties"]["profiles"]["items"]["allOf"]
    listed = {}
    for rule in rules:
        tests = rule["if"]["properties"].get("test", {}).get("enum", [])
        then = rule["then"]["properties"]
        listed.update(dict.fromkeys(tests, (then.get("_figure", {}).get("const"), then["unit"]["const"])))
    kinds = [registry.get(name) for name in registry.names()]
    built_in = {k.name: (k.field, k.unit) for k in kinds if k.figure.__module__.startswith("rdmabench.measure.kinds")}
    assert listed == built_in


def test_a_profile_holds_no_field_a_record_or_the_ranks_fill_in() -> None:
    """The profile schema forbids exactly what expansion fills in (a profile of an earlier version
    held `blocks`, still read)."""
    forbidden = {key for key, node in PROFILE["properties"].items() if node is False}
    assert forbidden == compact.FILLED_IN - {"blocks"}


def test_a_schema_keyword_the_loader_does_not_apply_is_refused() -> None:
    with pytest.raises(ValueError, match="pattern"):
        schema.compile_schema({"type": "string", "pattern": "^[a-z]+$"})


# --- derived figures ----------------------------------------------------------------------------


def test_check_judges_the_share_of_the_figure_not_the_share_stored(tmp_path: Path) -> None:
    """A file claiming every link at 1e9 of its limit: check takes figure / limit (a share of the
    real figure, far below 99%) and fails; the share it reports is that one."""
    summary, links = real("allpairs-bw")
    for line in links:
        line["share"] = 1e9
    path = write(tmp_path, summary, links)
    verdict = tmp_path / "verdict.json"
    proc = run_cli_here(["check", str(path), "--expect", "all=0.99", "--json", str(verdict)])
    assert proc.returncode == 1 and "verdict: FAIL" in proc.stdout, proc.stdout + proc.stderr
    limit = summary["profiles"][0]["link_limit"]["gbps"]
    for judged in json.loads(verdict.read_text())["failed"]:
        assert judged["share_of_limit"] == pytest.approx(judged["median"] / limit)
    entries = document.load(str(path))["results"]
    assert all(e["share_of_limit"] == pytest.approx(e["bandwidth_gbps"] / limit) for e in entries)


def test_a_unit_that_is_not_its_tests_is_refused_for_every_record(tmp_path: Path) -> None:
    """A bw profile claiming microseconds: the first record was checked as the GB/s its test
    measures, and every record after it passed with 500 TB/s (in "us": no bound). Now the profile
    is refused, in one line, before any record."""
    summary, links = real("allpairs-bw")
    summary["profiles"][links[0]["profile"]]["unit"] = "us"
    for line in links[1:]:
        line["samples"] = [5e5] * len(line["samples"])
    path = write(tmp_path, summary, links)
    proc = run_cli_here(["report", str(path)])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert [line for line in lines if 'profiles[0].unit is "us", not "GB/s"' in line], proc.stderr


def test_derived_figures_are_recomputed_on_load(tmp_path: Path) -> None:
    summary, links = real("bibw")
    for line in links:
        line.update(share=5.0, agg_share=7.0, agg=99.0)
    ring, ring_links = real("ring-bw")
    for line in ring_links:
        line["together_share"] = 1e6
    for entry in document.load(str(write(tmp_path, summary, links)))["results"]:
        limit = entry["link_limit"]["gbps"]
        assert entry["share_of_limit"] == pytest.approx(entry["bandwidth_gbps"] / limit)
        assert entry["aggregate_gbps"] == pytest.approx(statistics.median(entry["aggregate_samples"]))
        assert entry["aggregate_share_of_limit"] == pytest.approx(entry["aggregate_gbps"] / (2 * limit))
    other = tmp_path / "ring"
    other.mkdir()
    for entry in document.load(str(write(other, ring, ring_links)))["results"]:
        together = entry["pattern_aggregate_gbps"] / entry["pattern_limit"]["gbps"]
        assert entry["pattern_share_of_limit"] == pytest.approx(together)


# --- the property: loader accepts <=> schema validates and the relational rules hold -------------

LARGEST = 1e6  # generated numbers stay far from overflow: a sum of samples must stay finite


def values(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values `node` allows, from its own types and keywords (the subset the schemas use; an `if`
    is left to the caller's fix-ups)."""
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    types = node.get("type", "object")
    return st.one_of([_typed(name, node) for name in (types if isinstance(types, list) else [types])])


def _typed(name: str, node: dict[str, Any]) -> st.SearchStrategy[Any]:
    low = node.get("minimum", node.get("exclusiveMinimum", -LARGEST))
    high = min(node.get("maximum", node.get("exclusiveMaximum", LARGEST)), LARGEST)
    if name == "integer":
        return st.integers(math.ceil(low) + ("exclusiveMinimum" in node), min(int(high), int(low) + 1000))
    if name == "number":
        return st.floats(low, high, exclude_min="exclusiveMinimum" in node, exclude_max="exclusiveMaximum" in node)
    if name == "string":
        return st.text(min_size=node.get("minLength", 0), max_size=6)
    if name == "array":
        return st.lists(values(node.get("items", {"type": "null"})), min_size=node.get("minItems", 0), max_size=4)
    if name == "object":
        properties = node.get("properties", {})
        required = {key: values(properties.get(key, {"type": "null"})) for key in node.get("required", [])}
        optional = {key: values(sub) for key, sub in properties.items() if key not in required and sub is not False}
        return st.fixed_dictionaries(required, optional=optional)
    return st.just(None) if name == "null" else st.booleans()


# A test, its figure field and unit: built-in tests, and tests this process has no record of.
TESTS = [("bw", "bandwidth_gbps", "GB/s"), ("lat", "latency_us", "us"), ("put-lat", "latency_us", "us")]
TESTS += [("mine", "bandwidth_gbps", "GB/s"), ("yours", "latency_us", "us")]
PROFILE = SUMMARY["properties"]["profiles"]["items"]
RANK = SUMMARY["properties"]["ranks"]["items"]


@st.composite
def results(draw: st.DrawFn) -> Result:
    """A valid schema-2 result: each part drawn from its schema, then the fields the schema leaves
    to the rules between parts set to hold them."""
    summary = draw(values({**SUMMARY, "properties": {**SUMMARY["properties"], "profiles": {}, "ranks": {}}}))
    summary["links"]["file"] = "r.links.jsonl"
    ranks = draw(st.lists(values(RANK), min_size=2, max_size=3))  # a link joins two ranks
    for number, row in enumerate(ranks):
        row["rank"] = number
    profiles = draw(st.lists(values({k: v for k, v in PROFILE.items() if k != "allOf"}), min_size=1, max_size=2))
    for profile in profiles:
        profile["test"], profile["_figure"], profile["unit"] = draw(st.sampled_from(TESTS))
        profile["_ends"] = [end for end in profile["_ends"] if all(end[4:] in row for row in ranks)]
    summary.update(profiles=profiles, ranks=ranks)
    links = draw(st.lists(values(LINK), min_size=1, max_size=4))
    for line in links:
        line["profile"] = draw(st.integers(0, len(profiles) - 1))
        line["src"], line["dst"] = draw(st.permutations(range(len(ranks))))[:2]
        if profiles[line["profile"]]["unit"] == "GB/s":
            line["samples"] = [min(v, 9e4) for v in line["samples"]]
    summary["links"]["count"] = len(links)  # the links file holds what its summary says
    return summary, links


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 1 << 40),
    st.floats(-LARGEST, LARGEST),
    st.integers(0, 1 << 30).map(float),  # integral floats
    st.text(max_size=4),
    st.lists(st.one_of(st.integers(-2, 5), st.floats(-1, 1e5)), max_size=3),
    st.dictionaries(st.sampled_from(["src", "dst", "gbps", "kind", "dev", "ratio"]), st.integers(-1, 3), max_size=3),
    st.just(1e5),  # a bandwidth's bound, exactly
)
DELETE = object()


@st.composite
def mutated(draw: st.DrawFn) -> Result:
    """A valid result with one field (anywhere: summary, metadata, links, a profile, a rank row, a
    link record or an object inside one) set to any JSON value, or removed."""
    summary, links = draw(results())
    places: list[dict[str, Any]] = [summary, summary["metadata"], summary["links"], summary["schema"]]
    places += summary["profiles"] + summary["ranks"] + links
    places += [v for line in links for v in line.values() if isinstance(v, dict)]
    place = draw(st.sampled_from(places))
    known = {*SUMMARY["properties"], *LINK["properties"], *PROFILE["properties"], *RANK["properties"]}
    key = draw(st.sampled_from(sorted({*place, *known} - {"allOf"})))
    value = draw(st.one_of(st.just(DELETE), JUNK))
    if value is DELETE:
        place.pop(key, None)
    else:
        place[key] = value
    return summary, links


def relational_problems(summary: dict[str, Any], links: list[dict[str, Any]]) -> list[str]:
    """The rules the schemas' descriptions state that one line of JSON cannot: the links file is the
    one beside the summary and holds as many records as it says, a record's profile exists and its ranks hold what the profile takes
    from them, its two ends are two ranks, it holds no `blocks` or `beside` where the run's configuration
    says it had none, samples in GB/s stay below 100000, and a test the registry has no record of is read
    by a figure field rdmabench knows (bandwidth_gbps, latency_us)."""
    problems = []
    if os.path.basename(summary["links"]["file"]) != "r.links.jsonl":
        problems.append("the links file is not beside the summary")
    elif summary["links"]["count"] != len(links):
        problems.append("the links file holds another number of records than the summary says")
    profiles, ranks = summary["profiles"], {row["rank"]: row for row in summary["ranks"]}
    config = summary["metadata"].get("config")
    unrun = set()  # what a run's whole configuration (it always records `blocks`) says it never wrote
    if isinstance(config, dict) and "blocks" in config:
        unrun |= {"blocks"} if config["blocks"] is None else set()
        unrun |= {"beside"} if config.get("beside", "none") in ("none", None) else set()
    for profile in profiles:
        if registry.find(profile["test"]) is None and profile["_figure"] not in ("bandwidth_gbps", "latency_us"):
            problems.append(f"no figure field to read {profile['test']} by")
    for line in links:
        if line["src"] == line["dst"]:
            problems.append("one rank at both ends")
        if unrun & line.keys():
            problems.append(f"{unrun & line.keys()} in a run whose configuration has none")
        if line["profile"] >= len(profiles):
            problems.append("a profile past the end")
            continue
        profile = profiles[line["profile"]]
        for end in profile["_ends"]:
            rank = line["src"] if end.startswith("src") else line["dst"]
            if end not in line and end[4:] not in ranks.get(rank, {}):
                problems.append(f"rank {rank} lacks {end[4:]}")
        if profile["unit"] == "GB/s" and max(line["samples"]) >= 1e5:
            problems.append("a bandwidth of 100 TB/s or more")
    return problems


def holds_together(tmp_path: Path, result: Result) -> None:
    summary, links = copy.deepcopy(result)
    expected = not schema_errors(summary, links) and not relational_problems(summary, links)
    directory = tmp_path / "r"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    problem = loaded(write(directory, *result))
    assert (problem is None) == expected, problem or f"the loader accepts {schema_errors(summary, links)}"


FAST = settings(
    max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FAST
@given(result=results())
def test_every_valid_result_loads(tmp_path: Path, result: Result) -> None:
    assert schema_errors(*result) == [] and relational_problems(*result) == []
    holds_together(tmp_path, result)


@FAST
@given(result=mutated())
def test_the_loader_accepts_exactly_what_the_schema_validates(tmp_path: Path, result: Result) -> None:
    holds_together(tmp_path, result)
