# lat 8 B with the bracket (5 rounds), then the GPU suite on this tree.
. results/window-20261124/prefix.sh
timeout -s KILL 200 python3 -m rdmabench anchor --mode host --sizes 8 --tests lat --repeat 5 -o $OUT/lat-r5.json \
  > $OUT/lat-r5.txt 2>&1
echo "rc=$?" >> $OUT/lat-r5.txt
tail -5 $OUT/lat-r5.txt
timeout -s KILL 380 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_torchcopy.py tests/test_storage.py \
  -p no:cacheprovider -rs > $OUT/gpu-suite.txt 2>&1
tail -8 $OUT/gpu-suite.txt
