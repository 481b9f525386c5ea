// The operands of the block-scaled fp8 GEMM (LtGemm::run_fp8, cuBLASLt on sm_90; docs/cuda-
// backend.md "fp8 tensor-core GEMMs"):
//  * activations: bf16 [T, K] -> e4m3 [T, K] with one f32 scale per (token, 128 columns), the
//    group's absolute maximum / 448 (DeepSeek-V3's and vLLM's per-token-group quantization), so
//    the group's largest value lands on e4m3's largest finite one;
//  * int4 weights (W4A8): u4x2 [N, K / 2] with per-(row, 128-column group) scales and zero points
//    -> e4m3 [N, K] holding (q - z) (an integer in [-16, 15]: exact in e4m3) and the group's scale
//    unchanged, so the GEMM computes exactly the weight the checkpoint describes.
// Both write their scales in cuBLASLt's VEC128 layout: [K / 128][rows], rows contiguous.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_convert.cuh"

namespace syv::cuda {
namespace {

constexpr int kGroup = 128;        // columns per scale
constexpr int kWarpsPerBlock = 8;  // one warp per (row, group)

// One warp per (token, 128-column group): each lane converts 4 consecutive values. Rows
// [tokens, padded) are the GEMM's padding: zero codes, scale 1.
__global__ void quantize_fp8_groups_kernel(const bf16* __restrict__ x, uint8_t* __restrict__ q,
                                           float* __restrict__ scales, int64_t tokens,
                                           int64_t padded, int64_t k) {
  pdl_wait();  // x is the previous kernel's output; q and scales may still be read by a GEMM
  pdl_trigger();
  const int lane = threadIdx.x & 31;
  const int64_t groups = k / kGroup;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (item >= padded * groups) return;
  const int64_t t = item / groups, g = item - t * groups;
  const int64_t at = t * k + g * kGroup + lane * 4;
  if (t >= tokens) {
    *reinterpret_cast<uint32_t*>(q + at) = 0u;
    if (lane == 0) scales[g * padded + t] = 1.f;
    return;
  }
  const uint2 raw = *reinterpret_cast<const uint2*>(x + at);
  const bf16* v = reinterpret_cast<const bf16*>(&raw);
  float f[4];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[i] = __bfloat162float(v[i]);
    amax = fmaxf(amax, fabsf(f[i]));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  // A zero group gets scale 1 and zero codes. Otherwise codes are x * (448 / amax), rounded.
  const float scale = amax > 0.f ? amax / 448.f : 1.f;
  const float inv = amax > 0.f ? 448.f / amax : 0.f;
  uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed |= static_cast<uint32_t>(f32_to_e4m3(f[i] * inv)) << (8 * i);
  *reinterpret_cast<uint32_t*>(q + at) = packed;
  if (lane == 0) scales[g * padded + t] = scale;
}

// One thread per 8 weights (a 32-bit word of nibbles); the first word of each group also moves
// the group's scale to the transposed layout.
__global__ void int4_to_fp8_kernel(const QuantWeight w, uint8_t* __restrict__ q,
                                   float* __restrict__ scales) {
  pdl_wait();  // q and scales (scratch) may still be read by the previous GEMM
  pdl_trigger();
  const int64_t words_per_row = w.k / 8;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= w.n * words_per_row) return;
  const int64_t n = item / words_per_row, j = item - n * words_per_row, g = j * 8 / kGroup;
  const uint32_t word = static_cast<const uint32_t*>(w.data)[item];
  const int z = w.zeros ? w.zeros[n * w.scale_cols + g] : 8;
  // The e4m3 code of nibble q's weight q - z: an integer in [-16, 15], exact in e4m3.
  auto code = [z](uint32_t nibble) {
    return uint32_t{f32_to_e4m3(static_cast<float>(static_cast<int>(nibble & 0xfu) - z))};
  };
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    lo |= code(word >> (4 * e)) << (8 * e);
    hi |= code(word >> (16 + 4 * e)) << (8 * e);
  }
  reinterpret_cast<uint2*>(q)[item] = make_uint2(lo, hi);
  if ((j * 8) % kGroup == 0) scales[g * w.n + n] = w.scales[n * w.scale_cols + g];
}

}  // namespace

bool fp8_activation_groups_supported(int64_t k, const void* x) {
  return k > 0 && k % kGroup == 0 && reinterpret_cast<uintptr_t>(x) % 8 == 0;
}

void launch_quantize_fp8_groups(const void* x, uint8_t* q, float* scales, int64_t tokens,
                                int64_t padded, int64_t k, cudaStream_t s) {
  const int64_t items = padded * (k / kGroup);
  if (items == 0) return;
  launch_k(quantize_fp8_groups_kernel, static_cast<unsigned>(ceil_div(items, kWarpsPerBlock)),
           kWarpsPerBlock * 32, 0, s, static_cast<const bf16*>(x), q, scales, tokens, padded, k);
}

bool int4_to_fp8_supported(const QuantWeight& w) {
  return w.kind == QuantKind::kInt4Group && w.g_idx == nullptr && w.group_size == kGroup &&
         w.k % kGroup == 0 && w.scale_cols == w.k / kGroup &&
         reinterpret_cast<uintptr_t>(w.data) % 4 == 0;
}

void launch_int4_to_fp8(const QuantWeight& w, uint8_t* q, float* scales, cudaStream_t s) {
  const int64_t items = w.n * (w.k / 8);
  if (items == 0) return;
  launch_k(int4_to_fp8_kernel, static_cast<unsigned>(ceil_div(items, int64_t{256})), 256, 0, s, w,
           q, scales);
}

}  // namespace syv::cuda
