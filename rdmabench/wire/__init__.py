"""How ranks talk: the MPI control plane, the UCX data plane and its reports, staged pipelines, the native C loop."""
