"""`rdmabench storage`: a file into GPU or host memory by every path (storage, paths; config, datafile, sampling, limits, records), and the targets as ratios (targets)."""
