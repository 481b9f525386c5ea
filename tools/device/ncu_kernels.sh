#!/usr/bin/env bash
# On the GPU machine: every kernel a command launches under ncu (duration, grid size, DRAM bytes
# read; clocks and caches left alone), summed per kernel name and grid size, largest first, with
# each group's mean time and DRAM read rate: GPU time alone, whatever the host adds between
# launches. FILTER (a regex on kernel names, ncu's --kernel-name regex:) narrows what is profiled.
#   tools/device/ncu_kernels.sh CMD [ARGS...]
set -uo pipefail
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[[ -x $NCU ]] || { echo "ncu_kernels: ncu not found"; exit 1; }
CSV=$(mktemp)
"$NCU" --csv --page raw --print-units base \
  --metrics gpu__time_duration.sum,launch__grid_size,dram__bytes_read.sum \
  --clock-control none --cache-control none ${FILTER:+--kernel-name "regex:$FILTER"} \
  "$@" >"$CSV" 2>/dev/null
python3 - "$CSV" <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
tot = collections.defaultdict(float); cnt = collections.Counter(); dram = collections.defaultdict(float)
def num(r, k):
    return float(r[k].replace(",", ""))
for r in csv.DictReader(rows):
    try:
        t = num(r, "gpu__time_duration.sum")
    except (KeyError, ValueError):
        continue  # the units row
    key = (r.get("Kernel Name", "?")[:110], r.get("launch__grid_size", "?"))
    tot[key] += t; cnt[key] += 1
    try:
        dram[key] += num(r, "dram__bytes_read.sum")
    except (KeyError, ValueError):
        pass
print(f"ncu_kernels: {sum(cnt.values())} launches, {sum(tot.values())/1e6:.3f} ms in all")
print("| launches | mean us | grid | DRAM read GB/s | kernel |")
for key, t in sorted(tot.items(), key=lambda kv: -kv[1])[:40]:
    name, grid = key
    print(f"| {cnt[key]} | {t/cnt[key]/1e3:.2f} | {grid} | {dram[key]/t if t else 0:.0f} | {name} |")
PY
rm -f "$CSV"
