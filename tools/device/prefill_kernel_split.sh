#!/usr/bin/env bash
# On the GPU machine: where one prefill's time goes, kernel by kernel, without nsys (not installed
# on the lent H200 machine, 2026-12-05). `syv bench prefill` with SYV_BENCH_PROFILE_RANGE=1 runs one
# more prefill of each length inside the profiler's capture range (cuda_profiler_range), and ncu,
# started with capture off and one metric (gpu__time_duration: one replay pass a kernel), times each
# of its kernels; printed summed by kernel name, largest first, with the share of the prefill.
# Kernel times under ncu are serialized and at ncu's clocks: shares, not the bench's milliseconds.
# Carry .devcarry-deps.
#   CONFIG=tools/bench/configs/qwen3-next-24l LAYERS=4 LENGTHS=8192 tools/device/prefill_kernel_split.sh
#   (LAYERS: the config cut to its first LAYERS layers; default the whole config)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
CONFIG=${CONFIG:-tools/bench/configs/qwen3-next-24l}
LENGTHS=${LENGTHS:-8192}
LAYERS=${LAYERS:-0}
t0=$SECONDS
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv 2>&1 | tail -1
echo "build: $((SECONDS - t0)) s"
if ((LAYERS > 0)); then
  cut=/tmp/prefill-split-config
  python3 tools/device/cut_config.py "$CONFIG" "$LAYERS" $cut
  CONFIG=$cut
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[[ -x $NCU ]] || { echo "prefill_kernel_split: ncu not found"; exit 1; }
SYV_BENCH_PROFILE_RANGE=1 timeout 400 "$NCU" --profile-from-start off --csv \
  --metrics gpu__time_duration.sum $B/syv bench prefill --config "$CONFIG" --random-weights \
  --lengths "$LENGTHS" >/tmp/prefill_split.csv 2>/tmp/prefill_split.err
echo "ncu: rc $?, $((SECONDS - t0)) s"
grep -E "^\| prefill" /tmp/prefill_split.csv | head -4
python3 - /tmp/prefill_split.csv <<'PY'
import csv, sys, collections
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.DictReader(lines))
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "second": 1e6, "s": 1e6}
us, count = collections.Counter(), collections.Counter()
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    # "void syv::cuda::(anonymous namespace)::kernel<...>(...)" (or "<unnamed>::") ->
    # "syv::cuda::kernel"
    name = r["Kernel Name"].replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = name.removeprefix("void ")
    name = name.split("(")[0].split("<")[0][:60]
    unit = r["Metric Unit"]
    if unit not in scale:
        sys.exit(f"unknown time unit {unit!r}")
    us[name] += float(r["Metric Value"].replace(",", "")) * scale[unit]
    count[name] += 1
total = sum(us.values())
print(f"{sum(count.values())} kernels, {total / 1e3:.2f} ms under ncu (every length's prefill)")
for name, t in us.most_common(30):
    print(f"| {t / 1e3:8.3f} ms | {100 * t / total:5.1f}% | {count[name]:5d} | {name} |")
PY
tail -3 /tmp/prefill_split.err
echo "total: $((SECONDS - t0)) s"
