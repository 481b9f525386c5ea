#!/usr/bin/env bash
# On the GPU machine: where one decode step's time goes, kernel by kernel. `syv bench decode` with
# SYV_BENCH_PROFILE_RANGE=1 runs one more eager step of each (batch, context) inside the profiler's
# capture range; ncu, started with capture off, times each kernel of it (duration, DRAM bytes read
# and written, grid and block). Printed: the step's launches in order (the first LIST of them),
# then summed by kernel name and grid, largest first, with each group's DRAM rate. ncu runs the
# kernels one by one without programmatic dependent launch and at its own clocks: the sum is
# larger than the graph's step, whose time `syv bench decode` prints first (same config).
# Carry .devcarry-deps.
#   CONFIG=tools/bench/configs/qwen3-next-24l LAYERS=8 BATCH=1 CTX=512 \
#     tools/device/decode_kernel_split.sh
#   (LAYERS: the config cut to its first LAYERS layers; default the whole config, which for
#   qwen3-next-24l needs an H200. LIST: launches listed in order, default 40. NOBUILD=1: use
#   build/gpu-carry/bin as it is.)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
CONFIG=${CONFIG:-tools/bench/configs/qwen3-next-24l}
LAYERS=${LAYERS:-0}
BATCH=${BATCH:-1}
CTX=${CTX:-512}
LIST=${LIST:-40}
O=${OUT:-/tmp}
t0=$SECONDS
if [[ -z ${NOBUILD:-} ]]; then
  timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv 2>&1 | tail -1
  echo "build: $((SECONDS - t0)) s"
fi
if ((LAYERS > 0)); then
  cut=/tmp/decode-split-config-$LAYERS
  python3 tools/device/cut_config.py "$CONFIG" "$LAYERS" $cut
  CONFIG=$cut
fi
timeout 200 $B/syv bench decode --config "$CONFIG" --random-weights --batch "$BATCH" \
  --context "$CTX" --steps 20 2>&1 | tee $O/decode_bench.log | grep -E "^\| decode|rror"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[[ -x $NCU ]] || { echo "decode_kernel_split: ncu not found"; exit 1; }
SYV_BENCH_PROFILE_RANGE=1 timeout 300 "$NCU" --profile-from-start off --csv --clock-control none \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size \
  $B/syv bench decode --config "$CONFIG" --random-weights --batch "$BATCH" --context "$CTX" \
  --steps 3 --no-graphs >$O/decode_split.csv 2>$O/decode_split.err
echo "ncu: rc $?, $((SECONDS - t0)) s"
python3 - $O/decode_split.csv "$LIST" <<'PY'
import csv, sys, collections
lines = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
rows = list(csv.DictReader(lines))
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "second": 1e6, "s": 1e6}
bscale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
launches = collections.OrderedDict()  # ID -> {name, us, rd, wr, grid, block}
for r in rows:
    k = r.get("ID")
    # "void syv::cuda::(anonymous namespace)::k<...>(...)", "<unnamed>::" or (ncu 2025)
    # "void unnamed>::k<...>(...)" -> "k<...>"
    name = r["Kernel Name"].replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = name.replace("unnamed>::", "")
    name = name.removeprefix("void ").split("(")[0]
    short = name.split("<")[0].removeprefix("syv::cuda::")[:44]
    tmpl = name[len(name.split("<")[0]):][:40]
    d = launches.setdefault(k, {"name": short, "tmpl": tmpl, "us": 0.0, "rd": 0.0, "wr": 0.0,
                                "grid": "?", "block": "?"})
    m, u, v = r.get("Metric Name"), r.get("Metric Unit", ""), r.get("Metric Value", "0")
    v = v.replace(",", "")
    if m == "gpu__time_duration.sum":
        if u not in scale: sys.exit(f"unknown time unit {u!r}")
        d["us"] = float(v) * scale[u]
    elif m == "dram__bytes_read.sum": d["rd"] = float(v) * bscale.get(u, 1)
    elif m == "dram__bytes_write.sum": d["wr"] = float(v) * bscale.get(u, 1)
    elif m == "launch__grid_size": d["grid"] = v
    elif m == "launch__block_size": d["block"] = v
L = list(launches.values())
total = sum(d["us"] for d in L)
print(f"one step: {len(L)} kernels, {total:.1f} us summed under ncu, "
      f"{sum(d['rd'] for d in L) / 1e6:.1f} MB read, {sum(d['wr'] for d in L) / 1e6:.1f} MB written")
print("| # | us | MB read | GB/s | grid x block | kernel |")
for i, d in enumerate(L[: int(sys.argv[2])]):
    rate = (d["rd"] + d["wr"]) / (d["us"] * 1e3) if d["us"] > 0 else 0
    print(f"| {i} | {d['us']:.2f} | {d['rd'] / 1e6:.2f} | {rate:.0f} | {d['grid']} x {d['block']} "
          f"| {d['name']}{d['tmpl']} |")
groups = collections.OrderedDict()
for d in L:
    g = groups.setdefault((d["name"], d["grid"]), [0.0, 0, 0.0])
    g[0] += d["us"]; g[1] += 1; g[2] += d["rd"] + d["wr"]
print("| total us | share | launches | mean us | grid | GB/s | kernel |")
for (name, grid), (us, n, b) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:30]:
    print(f"| {us:.1f} | {100 * us / total:.1f}% | {n} | {us / n:.2f} | {grid} | "
          f"{b / (us * 1e3) if us else 0:.0f} | {name} |")
PY
tail -2 $O/decode_split.err
echo "total: $((SECONDS - t0)) s"
