// Sampling on the GPU: greedy argmax, so that only token ids cross to the host.
#include <cfloat>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

template <typename T>
__global__ void argmax_kernel(const T* __restrict__ logits, int64_t vocab, int32_t* ids) {
  pdl_wait();
  pdl_trigger();
  __shared__ float sv[32];
  __shared__ int32_t si[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  float best = -INFINITY;
  int32_t best_i = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = to_f32(x[i]);
    if (v > best) {  // strided ascending: the first max seen by this thread has the lowest index
      best = v;
      best_i = static_cast<int32_t>(i);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (ov > best || (ov == best && oi < best_i)) {
      best = ov;
      best_i = oi;
    }
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    best = lane < warps ? sv[lane] : -INFINITY;
    best_i = lane < warps ? si[lane] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (ov > best || (ov == best && oi < best_i)) {
        best = ov;
        best_i = oi;
      }
    }
    if (lane == 0) ids[row] = best_i == 0x7fffffff ? 0 : best_i;
  }
}

}  // namespace

void launch_argmax(const void* logits, DType t, int64_t rows, int64_t vocab, int32_t* ids,
                   cudaStream_t s) {
  if (rows == 0) return;
  SYV_DISPATCH_FLOAT(t, T, [&] {
    launch_k(argmax_kernel<T>, static_cast<unsigned>(rows), 1024, 0, s,
             static_cast<const T*>(logits), vocab, ids);
  });
}

}  // namespace syv::cuda
