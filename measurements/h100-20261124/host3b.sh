# #17 host line rate after the default host window became 1 MiB: three rounds of the anchor (bw with the
# 1-buffer column; lat 8 B), medians of the ratios. Everything lands in one tar (8 files come back).
source .base/dev/prefix.sh
mkdir -p /tmp/h3
for r in 1 2 3; do
  timeout -s KILL 200 python3 -m rdmabench anchor --mode host --sizes 4KiB,64KiB,1MiB,64MiB --tests bw -o /tmp/h3/bw-$r.json > /tmp/h3/bw-$r.txt 2>&1
  timeout -s KILL 60 python3 -m rdmabench anchor --mode host --sizes 8 --tests lat -o /tmp/h3/lat-$r.json > /tmp/h3/lat-$r.txt 2>&1
  echo "round $r done $(date +%T)"; tar -C /tmp -cf $OUT/host3b.tar h3
done
python3 dev/anchor_medians.py "/tmp/h3/*-[0-9].json" | tee $OUT/medians.txt
