"""`rdmabench copy`: host/device copies with CuPy (copy) and through PyTorch (torchcopy)."""
