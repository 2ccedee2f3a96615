"""rdmabench: how fast data really moves between GPUs, host memory and the nodes of a cluster."""

__version__ = "0.1.0"
