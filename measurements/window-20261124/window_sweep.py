"""Host-to-host bw by window depth against ucx_perftest tag_bw, round by round (one ucx_perftest run,
then each rdmabench setting, in one round, so each ratio is taken under the same machine state).

    python window_sweep.py ROUNDS SIZE WINDOW[,WINDOW...] OUT.json

Every setting is unchecked (--no-validate) except 'checked' (the default window, checked) and a
window written cN (window N, checked), so the window is the only thing that differs; '1buf' is
--one-buffer at the default window (ucx_perftest's layout)."""

import json
import statistics
import subprocess
import sys
import tempfile

from rdmabench.bench.perftest import perftest_iterations, run_perftest, same_ucx_settings
from rdmabench.results.document import load
from rdmabench.units import parse_sizes

rounds, size, windows, out = int(sys.argv[1]), parse_sizes(sys.argv[2])[0], sys.argv[3].split(","), sys.argv[4]
same_ucx_settings()
settings = {f"w{w}": ["--window", w, "--no-validate"] for w in windows if not w.startswith("c")}
settings |= {f"checked-w{w[1:]}": ["--window", w[1:]] for w in windows if w.startswith("c")}
settings |= {"default": ["--no-validate"], "checked": [], "1buf": ["--no-validate", "--one-buffer"]}
ratios: dict[str, list[float]] = {name: [] for name in settings}
anchors = []
for r in range(rounds):
    anchor = run_perftest("tag_bw", size, False, perftest_iterations("tag_bw", size)).bandwidth_gbps
    anchors.append(anchor)
    line = [f"round {r + 1}: ucx_perftest {anchor:.2f} GB/s"]
    for name, extra in settings.items():
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "rdmabench", "run", "--sizes", str(size), "--samples", "5"]
            cmd += ["--sample-time", "0.2", "-o", f"{tmp}/r.json", *extra]
            subprocess.run(cmd, check=True, capture_output=True, timeout=300)
            entry = load(f"{tmp}/r.json")["results"][0]
        ratios[name].append(entry["bandwidth_gbps"] / anchor)
        line.append(f"{name} {entry['bandwidth_gbps']:.2f} (w{entry['window']}) {ratios[name][-1]:.2f}")
    print("; ".join(line), flush=True)
print(f"size {size}: ucx_perftest median {statistics.median(anchors):.2f} GB/s over {rounds} rounds")
for name, values in ratios.items():
    print(f"  {name:<8} ratio median {statistics.median(values):.3f}  range {min(values):.3f}-{max(values):.3f}")
json.dump({"size": size, "anchors": anchors, "ratios": ratios}, open(out, "w"), indent=1)
