# Does a cache-sized window (1 MiB in flight per end) close the default's gap to ucx_perftest at 64 KiB and 1 MiB?
source .base/dev/prefix.sh
run() { timeout -s KILL 100 python3 -m rdmabench run --np 2 --samples 5 --sample-time 0.2 --format json "$@" > /dev/null 2>>$OUT/err.txt; }
for r in 1 2 3; do
  timeout -s KILL 200 python3 -m rdmabench anchor --mode host --sizes 64KiB,1MiB --tests bw -o $OUT/w-$r.json > $OUT/w-$r.txt 2>&1
  run --sizes 64KiB --window 16 -o $OUT/c64-$r.json; run --sizes 64KiB --window 16 --no-validate -o $OUT/u64-$r.json
  run --sizes 1MiB --window 1 -o $OUT/c1m-$r.json; run --sizes 1MiB --window 1 --no-validate -o $OUT/u1m-$r.json
  echo "round $r $(date +%T)"
done
python3 - <<'PY' | tee $OUT/win-medians.txt
import json, os, statistics
from rdmabench.results.document import load
out = os.environ["OUT"]
rows = {}
for r in (1, 2, 3):
    anchor = {row["size_bytes"]: row["anchor"] for row in json.load(open(f"{out}/w-{r}.json"))["rows"]}
    for name, size in (("c64", 65536), ("u64", 65536), ("c1m", 1 << 20), ("u1m", 1 << 20)):
        try:
            e = load(f"{out}/{name}-{r}.json")["results"][0]
        except Exception as exc:
            print(name, r, exc); continue
        rows.setdefault(name, []).append(e["bandwidth_gbps"] / anchor[size])
for name, v in rows.items():
    print(f"{name} small window / perftest median {statistics.median(v):.3f} runs {' '.join(f'{x:.3f}' for x in v)}")
PY
python3 dev/anchor_medians.py "$OUT/w-[0-9].json" | grep -v python | tee -a $OUT/win-medians.txt
