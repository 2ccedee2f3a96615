"""`rdmabench anchor`: rdmabench beside the C anchor ucx_perftest (anchor, perftest, the copy-engine ceilings) and beside NIXL (nixl, nixl_agent)."""
