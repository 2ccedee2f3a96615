import numpy as np
import pytest

from rdmabench.stats import percentile, summarize


@pytest.mark.parametrize("q", [0, 5, 25, 50, 75, 95, 100])
def test_percentile_matches_numpy(q: float) -> None:
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_summary_of_one_sample() -> None:
    s = summarize([2.5])
    assert s["median"] == s["min"] == s["max"] == 2.5
    assert s["stdev"] == 0.0
