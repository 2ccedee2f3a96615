# The GPU suite and a short host anchor on this tree (run on the device machine from the repo root).
. measurements/window-20261124/prefix.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/env.txt
git log -1 --oneline >> $OUT/env.txt 2>/dev/null
timeout -s KILL 330 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_torchcopy.py tests/test_storage.py \
  -p no:cacheprovider -rs > $OUT/gpu-suite.txt 2>&1
tail -8 $OUT/gpu-suite.txt
timeout -s KILL 240 python3 -m rdmabench anchor --mode host --sizes 8,64KiB,1MiB --tests bw,lat --repeat 3 -o $OUT/anchor-r3.json \
  > $OUT/anchor-r3.txt 2>&1
echo "rc=$?" >> $OUT/anchor-r3.txt
tail -12 $OUT/anchor-r3.txt
