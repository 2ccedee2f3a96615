"""Stand-alone benchmarks: host/device copies, the ucx_perftest anchor, rings against pairs, sweeps, reports at scale."""
