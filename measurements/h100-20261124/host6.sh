# Six more anchor rounds at 64 KiB and 1 MiB (bw), the new default host window: medians over rounds.
source .base/dev/prefix.sh
mkdir -p /tmp/h6
for r in 1 2 3 4 5 6; do
  timeout -s KILL 150 python3 -m rdmabench anchor --mode host --sizes 64KiB,1MiB --tests bw -o /tmp/h6/bw-$r.json > /tmp/h6/bw-$r.txt 2>&1
  echo "round $r done $(date +%T)"; tar -C /tmp -cf $OUT/host6.tar h6
done
python3 dev/anchor_medians.py "/tmp/h6/*-[0-9].json" | tee $OUT/medians6.txt
