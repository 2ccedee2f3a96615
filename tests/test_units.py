import pytest

from rdmabench.errors import ConfigError
from rdmabench.units import format_size, gbps, parse_size, parse_sizes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8", 8),
        ("1KiB", 1024),
        ("64kib", 65536),
        ("1M", 1 << 20),
        ("1MiB", 1 << 20),
        ("2GiB", 2 << 30),
        ("1MB", 10**6),
        ("3kB", 3000),
        ("7B", 7),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "-8", "1.5MiB", "abc", "8XB", "", "17GiB"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_size(text)


def test_power_of_two_range_includes_both_ends() -> None:
    assert parse_sizes("1:64MiB") == [1 << i for i in range(27)]


def test_range_with_step_and_list_are_merged_sorted_unique() -> None:
    assert parse_sizes("1:64MiB:x4") == [4**i for i in range(14)]
    assert parse_sizes("1MiB,8,64MiB,8") == [8, 1 << 20, 64 << 20]
    assert parse_sizes("3:20") == [3, 6, 12]


@pytest.mark.parametrize("text", ["64:8", "1:64:x1", "1:2:3:4", "8,,16", "1:8:xx"])
def test_bad_lists(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_sizes(text)


def test_format_and_rate_units() -> None:
    assert format_size(8) == "8"
    assert format_size(65536) == "64KiB"
    assert format_size((3 << 20) + 1) == str((3 << 20) + 1)
    assert gbps(2e9, 2.0) == pytest.approx(1.0)  # GB/s is 1e9 bytes per second
