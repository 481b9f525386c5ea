// Device helpers shared by the CUDA kernels: element loads/stores in f32 for every dtype the
// backend accepts, 16-byte vector access for bf16 rows, warp reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/dtype.h"

namespace syv::cuda {

// Element type tags used as kernel template parameters.
using bf16 = __nv_bfloat16;
using f16 = __half;

template <typename T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f32<bf16>(bf16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_f32<f16>(f16 v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ f16 from_f32<f16>(float v) {
  return __float2half_rn(v);
}

// A load of one element of run-time dtype (small vectors: norm weights, biases).
__device__ __forceinline__ float load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(p)[i];
    case DType::BF16:
      return __bfloat162float(static_cast<const bf16*>(p)[i]);
    case DType::F16:
      return __half2float(static_cast<const f16*>(p)[i]);
    default:
      return 0.f;
  }
}

// 8 bf16 <-> 8 floats through one 16-byte access.
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}
__device__ __forceinline__ uint4 pack8(const float* f) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// The warp's largest value v and its index i (the lowest index among equals) in every lane.
__device__ __forceinline__ void warp_argmax(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
  }
}

// Sum over a block of up to 1024 threads (blockDim.x a multiple of 32); every thread gets it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = lane < warps ? partial[lane] : 0.f;
  return warp_sum(total);
}

// Programmatic dependent launch (Hopper): kernels are launched so that the next kernel in the
// stream may start while this one finishes. Every kernel calls pdl_wait() before it touches memory
// that an earlier kernel writes (or reads: WAR), and pdl_trigger() to let the next kernel launch
// early. Both are no-ops without PDL. Before pdl_wait() a kernel may read immutable data (weights)
// and, where pdl_early_reads() says so, data that a kernel at least two launches back wrote and
// nothing since writes: every kernel calls pdl_trigger() only after its own pdl_wait(), so when a
// kernel starts, its predecessor has passed its wait and everything before that has completed,
// its stores performed. Such reads go through L2 (__ldcg), the point of coherence.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches carry the PDL attribute: on by default on compute capability 9.x (Hopper, where
// it was built and measured), off elsewhere; SYV_PDL=0 / SYV_PDL=1 in the environment start with
// it off / on; CudaBackend::set_pdl() switches it at run time (A/B timing). Defined in
// elementwise.cu.
bool pdl_enabled();
// Whether kernels read data written two or more launches back before their pdl_wait() (above):
// the MoE down GEMV its routing and first weight chunks, the gated delta rule step its state, the
// decode conv1d its window. On by default; SYV_PDL_EARLY_READS=0 reads it all after the wait (A/B
// timing). Defined in elementwise.cu.
bool pdl_early_reads();

// Dynamic shared memory one block may opt into on the current device
// (cudaDevAttrMaxSharedMemoryPerBlockOptin, read once per device): 227 KiB on sm_90, 163 KiB on
// sm_80, 99 KiB on sm_86 / 89 / 120. A kernel needing more is not launched there: its dispatcher
// takes a fallback (docs/cuda-backend.md "Architectures"). SYV_SMEM_LIMIT_KIB=N in the
// environment caps it at N KiB (a larger GPU then runs a smaller one's fallbacks: tests). Defined
// in elementwise.cu.
size_t device_smem_optin();
// Lets `kernel` take up to `bytes` of dynamic shared memory on the current device. The attribute
// (cudaFuncAttributeMaxDynamicSharedMemorySize) is a device's, so it is set once a device and
// kernel (and thread: no lock on the launch path), and raised where a launch asks for more: a
// process driving several GPUs (tensor parallel ranks) sets it on each. Callers pass one value a
// kernel and device (two threads setting different values could lower it). Defined in
// elementwise.cu.
void allow_dynamic_smem(const void* kernel, size_t bytes);
template <typename... KArgs>
void allow_dynamic_smem(void (*kernel)(KArgs...), size_t bytes) {
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
}
// The current device's multiprocessors and compute capability major (read once per device).
// Defined in elementwise.cu.
int device_sm_count();
int device_cc_major();

// An A/B switch read from the environment: the index in names[0, count) of `var`'s value, 0
// where it is unset or empty; any other value stops the process naming `var` and the accepted
// values. Defined in elementwise.cu.
int env_choice(const char* var, const char* const* names, int count);
inline int env_choice(const char* var, std::initializer_list<const char*> names) {
  return env_choice(var, names.begin(), static_cast<int>(names.size()));
}
// env_choice read once into `state` (-1 until read; a setter may store an index there first).
// Defined in elementwise.cu.
int env_choice_once(std::atomic<int>& state, const char* var,
                    std::initializer_list<const char*> names);
// An on/off A/B switch: `var`'s "0" or "1" (unset or empty: `on_by_default`), read once into
// `state` (-1 until read; a setter may store 0 / 1 there first). Defined in elementwise.cu.
bool env_switch(std::atomic<int>& state, const char* var, bool on_by_default);

// Launches `kernel` on `stream` (with the PDL attribute when enabled) and checks the launch.
template <typename... KArgs, typename... Args>
void launch_k(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
              Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  SYV_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

inline unsigned ceil_div(int64_t a, int64_t b) {
  return static_cast<unsigned>((a + b - 1) / b);
}

}  // namespace syv::cuda

// Calls BODY with `using TX = <type>` bound to the CUDA type of a float DType (f32, bf16, f16).
#define SYV_DISPATCH_FLOAT(dtype, TX, ...)                                       \
  [&] {                                                                          \
    switch (dtype) {                                                             \
      case ::syv::DType::F32: {                                                  \
        using TX = float;                                                        \
        return __VA_ARGS__();                                                    \
      }                                                                          \
      case ::syv::DType::BF16: {                                                 \
        using TX = ::syv::cuda::bf16;                                            \
        return __VA_ARGS__();                                                    \
      }                                                                          \
      case ::syv::DType::F16: {                                                  \
        using TX = ::syv::cuda::f16;                                             \
        return __VA_ARGS__();                                                    \
      }                                                                          \
      default:                                                                   \
        ::syv::cuda::cuda_fail(__FILE__, __LINE__, #dtype, "unsupported dtype"); \
    }                                                                            \
  }()
