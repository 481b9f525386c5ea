#!/usr/bin/env bash
# On the GPU machine: the chunked gated delta rule's forms, FLA's three phases
# (gated_delta_phases.cu, the default) with the walk on the tensor cores (the default), all three
# on the CUDA cores (SYV_GDN_MMA=none) or all three on the tensor cores (SYV_GDN_MMA=all; per
# phase: wu, walk, output), phase 1 solving by columns (SYV_GDN_WU=columns; with the default walk),
# and the one-kernel walk (gated_delta_chunked.cu, SYV_GDN_PHASES=0).
# Builds the hybrid tests and syv, runs the hybrid op tests (GatedDeltaRuleOneKernelAndThreePhases
# takes every form itself) and the hybrid golden tests under each form, the op timing (its "one
# kernel" and "SYV_GDN_MMA mask" rows against the default's), then `syv bench decode --lengths
# 2048,8192` on an 8-layer copy of the Qwen3-Next 24-layer shape and on the Qwen3.5 9B-class shape
# under each. docs/cuda-backend-notes.md "Run 20" to "Run 22" have the measurements. Carry
# .devcarry-deps (tools/device/pack_deps.sh) and .devcarry-tok. About 3 minutes on a fresh H100
# with three forms (2026-12-05); five now, not yet timed.
#   tools/device/gdn_phases_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[[ -d third_party/qwen3-tokenizer ]] || tar -xJf .devcarry-tok/tok.tar.xz
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
echo "== build $(date +%T)"
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_cuda_hybrid_ops_test \
  gpu_hybrid_golden_gpu_test 2>&1 | tail -1
[[ -x $B/syv ]] || {
  echo "build failed"
  exit 1
}
FORMS=("SYV_GDN_PHASES=0" "SYV_GDN_MMA=none" "SYV_GDN_MMA=walk" "SYV_GDN_MMA=all"
  "SYV_GDN_WU=columns")
for form in "${FORMS[@]}"; do
  echo "== tests, $form $(date +%T)"
  for t in gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test; do
    r=$(env $form timeout 120 $B/$t --gtest_filter='-*Timing*' 2>&1 |
      grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
    echo "$t: $r"
  done
done
echo "== op timing $(date +%T)"
timeout 90 $B/gpu_cuda_hybrid_ops_test --gtest_filter='*Timing*' 2>&1 | grep -E "delta rule"
mkdir -p /tmp/qnext-8l
python3 - tools/bench/configs/qwen3-next-24l/config.json /tmp/qnext-8l/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["num_hidden_layers"] = 8; c["layer_types"] = c["layer_types"][:8]
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
for cfg in /tmp/qnext-8l tools/bench/configs/qwen3.5-9b-class; do
  for form in "${FORMS[@]}"; do
    echo "== prefill $(basename $cfg), $form $(date +%T)"
    env $form timeout 150 $B/syv bench decode --config $cfg --random-weights --batch 1 \
      --context 64 --lengths 2048,8192 --steps 5 2>&1 | grep -E "^\| prefill"
  done
done
echo "== done $(date +%T)"
