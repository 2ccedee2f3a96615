"""Does pinning ucx_perftest's two processes to fixed cores steady it on this host? tag_bw at 16 KiB
and 4 KiB, 8 runs per placement, interleaved (placement A, B, C, A, B, C, ...), GB/s per run.

    python pinning.py OUT.json"""

import json
import os
import socket
import statistics
import subprocess
import sys
import time

from rdmabench.bench.perftest import parse_final, perftest_iterations, perftest_paths, same_ucx_settings


def free_port() -> int:
    """A TCP port free on this host a moment ago, for ucx_perftest's server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


same_ucx_settings()
binary, libdir = perftest_paths()
env = dict(os.environ, LD_LIBRARY_PATH=libdir)
placements = {"unpinned": (None, None), "cores 2,3": ("2", "3"), "cores 2,10": ("2", "10"), "both on 2-3": ("2-3", "2-3")}
figures: dict[str, dict[int, list[float]]] = {name: {} for name in placements}
for size in (16384, 4096):
    for _ in range(8):
        for name, (server_cpu, client_cpu) in placements.items():
            port = free_port()
            n = perftest_iterations("tag_bw", size)
            common = ["-t", "tag_bw", "-s", str(size), "-n", str(n), "-w", str(n // 10), "-p", str(port)]
            pin = lambda cpu: ["taskset", "-c", cpu] if cpu else []  # noqa: E731
            server = subprocess.Popen([*pin(server_cpu), binary, *common], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
            client = subprocess.run(["timeout", "-s", "KILL", "60", *pin(client_cpu), binary, "127.0.0.1", *common], env=env, capture_output=True, text=True)
            server.kill()
            server.wait()
            figures[name].setdefault(size, []).append(parse_final(client.stdout).bandwidth_gbps)
    for name in placements:
        values = figures[name][size]
        print(f"{size:>6} B {name:<12} median {statistics.median(values):6.2f}  min {min(values):6.2f}  max {max(values):6.2f}  "
              f"spread {(max(values) - min(values)) / statistics.median(values):.0%}", flush=True)
json.dump({str(k): v for k, v in figures.items()}, open(sys.argv[1], "w"), indent=1)
