#!/usr/bin/env bash
# On the GPU machine: every kernel of a few eager decode steps under ncu (duration only, clocks
# and caches left alone), summed per kernel name, largest first. Tells where a decode step's time
# goes; the copy / GEMM ceilings and the weight fill of `syv bench decode` show as their own names.
#   tools/device/kernel_profile.sh SYV CONFIG BATCH CONTEXT [more syv bench decode flags...]
set -uo pipefail
SYV=${1:?syv binary}
CFG=${2:?config folder}
BATCH=${3:?batch}
CTX=${4:?context}
shift 4
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[[ -x $NCU ]] || { echo "kernel_profile: ncu not found"; exit 1; }
CSV=$(mktemp)
"$NCU" --csv --page raw --metrics gpu__time_duration.sum --clock-control none --cache-control none \
  "$SYV" bench decode --config "$CFG" --random-weights --no-graphs --batch "$BATCH" --context "$CTX" \
  --steps 2 "$@" >"$CSV" 2>/dev/null
python3 - "$CSV" "$BATCH" "$CTX" <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
reader = csv.DictReader(rows)
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in reader:
    try:
        t = float(r["gpu__time_duration.sum"].replace(",", ""))
    except (KeyError, ValueError):
        print("units row:", r.get("gpu__time_duration.sum"))
        continue
    name = r.get("Kernel Name", "?")[:110]
    tot[name] += t; cnt[name] += 1
print(f"kernel_profile b={sys.argv[2]} ctx={sys.argv[3]}: {sum(cnt.values())} launches, "
      f"{sum(tot.values())/1e6:.3f} ms in all")
print("| total ms | launches | mean us | kernel |")
for name, t in sorted(tot.items(), key=lambda kv: -kv[1])[:40]:
    print(f"| {t/1e6:.3f} | {cnt[name]} | {t/cnt[name]/1e3:.2f} | {name} |")
PY
rm -f "$CSV"
