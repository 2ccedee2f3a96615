# #17 host line rate: three rounds of the anchor (bw with the new 1-buffer column; lat 8 B), median of ratios.
source .base/dev/prefix.sh
python3 -c "import pytest, click, matplotlib, mpi4py, cupy; print('imports ok', pytest.__version__)" 2>&1 | tee $OUT/env.txt
nproc >> $OUT/env.txt; lscpu | grep -E "Model name|L2|L3|NUMA node\(s\)" >> $OUT/env.txt
for r in 1 2 3; do
  timeout -s KILL 200 python3 -m rdmabench anchor --mode host --sizes 4KiB,64KiB,1MiB,64MiB --tests bw -o $OUT/bw-$r.json > $OUT/bw-$r.txt 2>&1
  timeout -s KILL 60 python3 -m rdmabench anchor --mode host --sizes 8 --tests lat -o $OUT/lat-$r.json > $OUT/lat-$r.txt 2>&1
  echo "round $r done $(date +%T)"
done
python3 dev/anchor_medians.py "$OUT/*-[0-9].json" | tee $OUT/medians.txt
