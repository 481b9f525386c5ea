#!/usr/bin/env bash
# On the GPU machine: every kernel of a few eager decode steps under ncu (duration, grid size and
# DRAM bytes read; clocks and caches left alone), summed per kernel name and grid size, largest
# first, with each group's DRAM read rate. Tells where a decode step's time goes and which GEMV
# shapes stream slowly; the copy / GEMM ceilings and the weight fill of `syv bench decode` show as
# their own names. CONFIG is a config folder (random weights) or a model folder with safetensors
# (its own weights: a `syv quantize`d folder, say).
#   tools/device/kernel_profile.sh SYV CONFIG BATCH CONTEXT [more syv bench decode flags...]
set -uo pipefail
SYV=${1:?syv binary}
CFG=${2:?config folder}
BATCH=${3:?batch}
CTX=${4:?context}
shift 4
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[[ -x $NCU ]] || { echo "kernel_profile: ncu not found"; exit 1; }
RANDOM_WEIGHTS=--random-weights
compgen -G "$CFG/*.safetensors" >/dev/null && RANDOM_WEIGHTS=
CSV=$(mktemp)
"$NCU" --csv --page raw --print-units base \
  --metrics gpu__time_duration.sum,launch__grid_size,dram__bytes_read.sum \
  --clock-control none --cache-control none \
  "$SYV" bench decode --config "$CFG" $RANDOM_WEIGHTS --no-graphs --batch "$BATCH" \
  --context "$CTX" --steps 2 "$@" >"$CSV" 2>/dev/null
python3 - "$CSV" "$BATCH" "$CTX" <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
reader = csv.DictReader(rows)
tot = collections.defaultdict(float); cnt = collections.Counter(); dram = collections.defaultdict(float)
def num(r, k):
    return float(r[k].replace(",", ""))
for r in reader:
    try:
        t = num(r, "gpu__time_duration.sum")
    except (KeyError, ValueError):
        print("units row:", r.get("gpu__time_duration.sum"), r.get("dram__bytes_read.sum"))
        continue
    key = (r.get("Kernel Name", "?")[:100], r.get("launch__grid_size", "?"))
    tot[key] += t; cnt[key] += 1
    try:
        dram[key] += num(r, "dram__bytes_read.sum")
    except (KeyError, ValueError):
        pass
print(f"kernel_profile b={sys.argv[2]} ctx={sys.argv[3]}: {sum(cnt.values())} launches, "
      f"{sum(tot.values())/1e6:.3f} ms in all")
print("| total ms | launches | mean us | grid | DRAM read GB/s | kernel |")
for key, t in sorted(tot.items(), key=lambda kv: -kv[1])[:48]:
    name, grid = key
    rate = dram[key] / t if t > 0 else 0  # bytes / ns = GB/s when the units row says byte, nsecond
    print(f"| {t/1e6:.3f} | {cnt[key]} | {t/cnt[key]/1e3:.2f} | {grid} | {rate:.0f} | {name} |")
PY
rm -f "$CSV"
