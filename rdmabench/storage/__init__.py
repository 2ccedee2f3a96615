"""`rdmabench storage`: a file into GPU or host memory by every path (storage, paths), and the targets as ratios (targets)."""
