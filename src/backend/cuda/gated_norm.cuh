// The GDN output norm's row arithmetic, shared by its kernel and the GEMV prologue that fuses it.
#pragma once

#include "backend/cuda/common.cuh"

namespace syv::cuda {

// One row of the GDN output norm (Backend::gated_rmsnorm) by one warp, lanes striding the row:
// out[d] = round(round(round(x[d] * rstd) * w(d)) * silu(z[d])), rstd = rsqrt(mean(x^2) + eps),
// each product rounded to TX. gated_rmsnorm_kernel and the GEMV's gated prologue both call it, so
// the GEMV reads the norm kernel's output bit for bit. w(d): the norm weight of column d as float.
template <typename TX, typename Weight>
__device__ __forceinline__ void gated_rmsnorm_row(const TX* xr, const TX* zr, Weight w, float eps,
                                                  int64_t D, TX* out) {
  const int lane = threadIdx.x & 31;
  float ss = 0.f;
  for (int64_t d = lane; d < D; d += 32) {
    const float v = to_f32(xr[d]);
    ss += v * v;
  }
  const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(D) + eps);
  for (int64_t d = lane; d < D; d += 32) {
    const float n = to_f32(from_f32<TX>(to_f32(xr[d]) * inv));
    const float nw = to_f32(from_f32<TX>(n * w(d)));
    const float z = to_f32(zr[d]);
    out[d] = from_f32<TX>(nw * (z / (1.f + __expf(-z))));
  }
}

}  // namespace syv::cuda
