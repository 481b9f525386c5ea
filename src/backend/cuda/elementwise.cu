// SiLU·mul, add, bias add.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

// out[t, i] = silu(g) * u with g = gate_up[t, i], u = gate_up[t, I + i]; silu in fp32, and the
// activation rounded to the output type before the product (as a bf16 model computes it).
template <typename TI, typename TO>
__global__ void silu_mul_kernel(const TI* __restrict__ gu, TO* __restrict__ out, int64_t tokens,
                                int64_t inter) {
  pdl_wait();
  pdl_trigger();
  const int64_t n = tokens * inter;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / inter, i = idx - t * inter;
    const float g = to_f32(gu[t * 2 * inter + i]);
    const float u = to_f32(gu[t * 2 * inter + inter + i]);
    const float act = to_f32(from_f32<TO>(g / (1.f + __expf(-g))));
    out[idx] = from_f32<TO>(act * u);
  }
}

// Vectorised bf16 path: 8 elements per thread (inter % 8 == 0).
__global__ void silu_mul_bf16x8_kernel(const bf16* __restrict__ gu, bf16* __restrict__ out,
                                       int64_t tokens, int64_t inter) {
  pdl_wait();
  pdl_trigger();
  const int64_t vecs = tokens * inter / 8;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < vecs;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t idx = v * 8, t = idx / inter, i = idx - t * inter;
    float g[8], u[8], o[8];
    unpack8(*reinterpret_cast<const uint4*>(gu + t * 2 * inter + i), g);
    unpack8(*reinterpret_cast<const uint4*>(gu + t * 2 * inter + inter + i), u);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float act = __bfloat162float(__float2bfloat16_rn(g[j] / (1.f + __expf(-g[j]))));
      o[j] = act * u[j];
    }
    *reinterpret_cast<uint4*>(out + idx) = pack8(o);
  }
}

template <typename TA, typename TB, typename TO>
__global__ void add_kernel(const TA* __restrict__ a, const TB* __restrict__ b, TO* __restrict__ out,
                           int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = from_f32<TO>(to_f32(a[i]) + to_f32(b[i]));
}

template <typename TO>
__global__ void bias_add_kernel(TO* out, const void* bias, DType bias_t, int64_t tokens,
                                int64_t n) {
  pdl_wait();
  pdl_trigger();
  const int64_t total = tokens * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = from_f32<TO>(to_f32(out[i]) + load_any(bias, bias_t, i % n));
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

}  // namespace

void launch_silu_mul(const void* gate_up, DType in_t, void* out, DType out_t, int64_t tokens,
                     int64_t inter, cudaStream_t s) {
  if (tokens == 0 || inter == 0) return;
  const bool aligned = (reinterpret_cast<uintptr_t>(gate_up) % 16 == 0) &&
                       (reinterpret_cast<uintptr_t>(out) % 16 == 0);
  if (in_t == DType::BF16 && out_t == DType::BF16 && inter % 8 == 0 && aligned) {
    launch_k(silu_mul_bf16x8_kernel, grid_for(tokens * inter / 8, 256), 256, 0, s,
             static_cast<const bf16*>(gate_up), static_cast<bf16*>(out), tokens, inter);
    return;
  }
  SYV_DISPATCH_FLOAT(in_t, TI, [&] {
    SYV_DISPATCH_FLOAT(out_t, TO, [&] {
      launch_k(silu_mul_kernel<TI, TO>, grid_for(tokens * inter, 256), 256, 0, s,
               static_cast<const TI*>(gate_up), static_cast<TO*>(out), tokens, inter);
    });
  });
}

void launch_add(const void* a, DType a_t, const void* b, DType b_t, void* out, DType out_t,
                int64_t n, cudaStream_t s) {
  if (n == 0) return;
  SYV_DISPATCH_FLOAT(a_t, TA, [&] {
    SYV_DISPATCH_FLOAT(b_t, TB, [&] {
      SYV_DISPATCH_FLOAT(out_t, TO, [&] {
        launch_k(add_kernel<TA, TB, TO>, grid_for(n, 256), 256, 0, s, static_cast<const TA*>(a),
                 static_cast<const TB*>(b), static_cast<TO*>(out), n);
      });
    });
  });
}

void launch_bias_add(void* out, DType out_t, const void* bias, DType bias_t, int64_t tokens,
                     int64_t n, cudaStream_t s) {
  if (tokens == 0 || n == 0) return;
  SYV_DISPATCH_FLOAT(out_t, TO, [&] {
    launch_k(bias_add_kernel<TO>, grid_for(tokens * n, 256), 256, 0, s, static_cast<TO*>(out), bias,
             bias_t, tokens, n);
  });
}

}  // namespace syv::cuda

namespace syv::cuda {
namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_random_kernel(T* p, int64_t n, uint64_t seed, float scale) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = mix64(seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(i));
    const float u = static_cast<float>(r >> 40) * (1.f / 16777216.f);  // [0, 1)
    p[i] = from_f32<T>((2.f * u - 1.f) * scale);
  }
}

}  // namespace

namespace {
std::atomic<int> g_pdl{-1};  // -1: not read from the environment yet
}  // namespace

bool pdl_enabled() {
  int v = g_pdl.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_PDL");
    if (e != nullptr && *e != '\0') {
      v = e[0] == '0' ? 0 : 1;
    } else {
      int dev = 0, major = 0;
      SYV_CUDA_CHECK(cudaGetDevice(&dev));
      SYV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
      v = major == 9 ? 1 : 0;
    }
    g_pdl.store(v, std::memory_order_relaxed);
  }
  return v != 0;
}

namespace {
std::atomic<int> g_pdl_early_reads{-1};  // -1: not read from the environment yet
}  // namespace

bool pdl_early_reads() {
  return env_switch(g_pdl_early_reads, "SYV_PDL_EARLY_READS", true);
}

namespace {
// `attr` of the current device, cached per device in `cache` (0: not read yet); `adjust` maps the
// value read before it is cached.
int cached_attribute(std::atomic<int> (&cache)[64], cudaDeviceAttr attr, int (*adjust)(int)) {
  int dev = 0;
  SYV_CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<int>* slot = dev >= 0 && dev < 64 ? &cache[dev] : nullptr;
  int v = slot != nullptr ? slot->load(std::memory_order_relaxed) : 0;
  if (v == 0) {
    SYV_CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, dev));
    if (adjust != nullptr) v = adjust(v);
    if (slot != nullptr) slot->store(v, std::memory_order_relaxed);
  }
  return v;
}
std::atomic<int> g_smem_optin[64], g_sm_count[64], g_cc_major[64];  // value-initialised: 0
}  // namespace

void allow_dynamic_smem(const void* kernel, size_t bytes) {
  int dev = 0;
  SYV_CUDA_CHECK(cudaGetDevice(&dev));
  // Per thread (no lock on the launch path): a second thread's first launch sets the attribute
  // again, to the same value.
  // Key: the kernel's host address (below 2^56) with the device in the top byte.
  thread_local std::unordered_map<uint64_t, size_t> allowed;
  size_t& now = allowed[reinterpret_cast<uintptr_t>(kernel) | static_cast<uint64_t>(dev) << 56];
  if (bytes <= now) return;
  SYV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(bytes)));
  now = bytes;
}

size_t device_smem_optin() {
  // SYV_SMEM_LIMIT_KIB: a lower limit, so that a large GPU runs the fallbacks of a smaller one
  // (99: sm_86 / 89 / 120, 163: sm_80).
  auto limit = [](int v) {
    const char* e = std::getenv("SYV_SMEM_LIMIT_KIB");
    return e != nullptr && std::atoi(e) > 0 ? std::min(v, std::atoi(e) * 1024) : v;
  };
  return static_cast<size_t>(
      cached_attribute(g_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, limit));
}
int device_sm_count() {
  return cached_attribute(g_sm_count, cudaDevAttrMultiProcessorCount, nullptr);
}
int device_cc_major() {
  return cached_attribute(g_cc_major, cudaDevAttrComputeCapabilityMajor, nullptr);
}

int env_choice(const char* var, const char* const* names, int count) {
  const char* e = std::getenv(var);
  if (e == nullptr || *e == 0) return 0;
  for (int i = 0; i < count; ++i)
    if (std::strcmp(e, names[i]) == 0) return i;
  std::string why = std::string("unknown value \"") + e + "\": expected one of";
  for (int i = 0; i < count; ++i) why += std::string(i == 0 ? " " : ", ") + names[i];
  cuda_fail(__FILE__, __LINE__, var, why.c_str());
}
int env_choice_once(std::atomic<int>& state, const char* var,
                    std::initializer_list<const char*> names) {
  int v = state.load(std::memory_order_relaxed);
  if (v < 0) {
    v = env_choice(var, names);
    state.store(v, std::memory_order_relaxed);
  }
  return v;
}
bool env_switch(std::atomic<int>& state, const char* var, bool on_by_default) {
  int v = state.load(std::memory_order_relaxed);
  if (v < 0) {
    const bool flipped =
        env_choice(var, {on_by_default ? "1" : "0", on_by_default ? "0" : "1"}) == 1;
    v = on_by_default != flipped ? 1 : 0;
    state.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}
void set_pdl_enabled(bool on) {
  g_pdl.store(on ? 1 : 0, std::memory_order_relaxed);
}

namespace {
// Every word of the block's dynamic shared memory set to all ones (a NaN as f32 and bf16).
__global__ void poison_shared_kernel(int words) {
  extern __shared__ uint32_t smem[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) smem[i] = 0xffffffffu;
}
}  // namespace

void launch_poison_shared_memory(cudaStream_t s) {
  int dev = 0, bytes = 0;
  SYV_CUDA_CHECK(cudaGetDevice(&dev));
  SYV_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  allow_dynamic_smem(poison_shared_kernel, static_cast<size_t>(bytes));
  // Blocks of the largest shared memory, one resident an SM at a time, twice the SMs: every SM
  // runs at least one in practice.
  launch_k(poison_shared_kernel, static_cast<unsigned>(2 * device_sm_count()), 1024,
           static_cast<size_t>(bytes), s, bytes / 4);
}

void launch_fill_random(void* p, DType t, int64_t n, uint64_t seed, float scale, cudaStream_t s) {
  if (n == 0) return;
  SYV_DISPATCH_FLOAT(t, T, [&] {
    launch_k(fill_random_kernel<T>, grid_for(n, 256), 256, 0, s, static_cast<T*>(p), n, seed,
             scale);
  });
}

}  // namespace syv::cuda
