"""Median and spread of each anchor ratio over anchor JSON files: anchor_medians.py 'GLOB'."""
import glob, json, statistics, sys

cells = {}
for path in sorted(glob.glob(sys.argv[1])):
    for row in json.load(open(path))["rows"]:
        key = (row["test"], row["size_bytes"])
        for column in ("anchor", "ratio_validated", "ratio_unvalidated", "ratio_python_loop", "ratio_one_buffer"):
            if row.get(column) is not None:
                cells.setdefault(key + (column,), []).append(row[column])
for (test, size, column), values in sorted(cells.items()):
    print(f"{test:<4} {size:>9} {column:<18} median {statistics.median(values):8.3f}  runs {' '.join(f'{v:.3f}' for v in values)}")
