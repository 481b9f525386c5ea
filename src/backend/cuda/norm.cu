// RMSNorm and the fused residual add + RMSNorm: one block per row, fp32 statistics.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

// When res_in is set: res_out = round(res_in + x) (res_out may be res_in); the norm is of the
// rounded residual (as a bf16 model computes it). Values are re-read from global memory (the row
// stays in L1/L2).
template <typename TX, typename TR, typename TO>
__global__ void rmsnorm_kernel(const TX* __restrict__ x, const TR* res_in, TR* res_out,
                               const void* w, DType w_t, float eps, bool one_plus,
                               TO* __restrict__ out, int64_t hidden) {
  pdl_wait();
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const TX* xr = x + row * hidden;
  const TR* ri = res_in ? res_in + row * hidden : nullptr;
  TR* ro = res_in ? res_out + row * hidden : nullptr;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = to_f32(xr[i]);
    if (ri) {
      TR sum = from_f32<TR>(to_f32(ri[i]) + v);
      ro[i] = sum;
      v = to_f32(sum);
    }
    ss += v * v;
  }
  const float rstd = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
  TO* o = out + row * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = ro ? to_f32(ro[i]) : to_f32(xr[i]);
    float g = load_any(w, w_t, i);
    if (one_plus) g += 1.f;
    o[i] = from_f32<TO>(v * rstd * g);
  }
}

}  // namespace

void launch_add_rmsnorm(const void* x, DType x_t, const void* res_in, void* res_out, DType res_t,
                        const void* w, DType w_t, float eps, bool one_plus, void* out, DType out_t,
                        int64_t rows, int64_t hidden, cudaStream_t s) {
  if (rows == 0) return;
  const int threads = hidden >= 1024 ? 1024 : (hidden >= 256 ? 256 : 64);
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    SYV_DISPATCH_FLOAT(out_t, TO, [&] {
      if (res_in == nullptr) {
        launch_k(rmsnorm_kernel<TX, TX, TO>, static_cast<unsigned>(rows), threads, 0, s,
                 static_cast<const TX*>(x), nullptr, nullptr, w, w_t, eps, one_plus,
                 static_cast<TO*>(out), hidden);
      } else {
        SYV_DISPATCH_FLOAT(res_t, TR, [&] {
          launch_k(rmsnorm_kernel<TX, TR, TO>, static_cast<unsigned>(rows), threads, 0, s,
                   static_cast<const TX*>(x), static_cast<const TR*>(res_in),
                   static_cast<TR*>(res_out), w, w_t, eps, one_plus, static_cast<TO*>(out), hidden);
        });
      }
    });
  });
}

void launch_rmsnorm(const void* x, DType x_t, void* residual, DType res_t, const void* w, DType w_t,
                    float eps, bool one_plus, void* out, DType out_t, int64_t rows, int64_t hidden,
                    cudaStream_t s) {
  launch_add_rmsnorm(x, x_t, residual, residual, res_t, w, w_t, eps, one_plus, out, out_t, rows,
                     hidden, s);
}

}  // namespace syv::cuda
