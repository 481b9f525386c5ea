// The small ops of the hybrid (Gated DeltaNet) layers: the causal depthwise conv1d with SiLU and
// its per-slot window, the GDN output norm (gated RMSNorm) and the attention output gate
// (sigmoid_mul). backend.h has their math; backend/cpu/cpu_hybrid_ops.cpp is the reference.
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/gated_norm.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kMaxConvKernel = 8;

__device__ __forceinline__ float silu(float x) {
  return x / (1.f + __expf(-x));
}

// One thread per (sequence, channel), token after token: the window lives in registers and goes
// back to the slot at the end. For batches of short sequences (decode, verify). KC: the kernel
// size when known at compile time (4, every Qwen3.5 / Qwen3-Next checkpoint), else 0 (a.kernel at
// run time). With a run-time size the window's arrays are indexed by run-time loops and live in
// local memory: H200, Qwen3.5 9B-class decode, 64 sequences x 8,192 channels: 13.5 us a layer.
// With a.early_reads the weights, the batch metadata and the window are read before the
// dependency wait: the kernel before this one is the projection GEMV that writes x (or, with
// in-pass saves, conv1d_save_kernel, which only reads the windows); the window was written by this
// layer's conv of an earlier forward or a checkpoint restore, two or more launches back
// (common.cuh's rule). Only x waits.
template <typename TX, int KC>
__global__ void conv1d_sequential_kernel(ConvArgs a) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (!a.early_reads) pdl_wait();
  const bool live = idx < int64_t{a.num_seqs} * a.channels;
  const int s = live ? static_cast<int>(idx / a.channels) : 0;
  const int c = live ? static_cast<int>(idx % a.channels) : 0;
  const int slot = live ? __ldcg(a.slots + s) : -1;
  const int K = KC > 0 ? KC : a.kernel;
  constexpr int N = KC > 0 ? KC : kMaxConvKernel;  // the arrays' size
  float* st = a.state + static_cast<int64_t>(slot < 0 ? 0 : slot) * (K - 1) * a.channels + c;
  float hist[N], w[N];
  if (slot >= 0) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (j < K) w[j] = load_any(a.weight, a.weight_t, int64_t{c} * K + j);
    }
#pragma unroll
    for (int j = 0; j < N - 1; ++j) {
      if (j < K - 1) hist[j] = __ldcg(st + int64_t{j} * a.channels);
    }
  }
  pdl_wait();  // x; a no-op when waited above
  pdl_trigger();
  if (slot < 0) return;
  const TX* x = static_cast<const TX*>(a.x);
  TX* out = static_cast<TX*>(a.out);
  const int t_end = __ldcg(a.seq_starts + s + 1);
  for (int t = __ldcg(a.seq_starts + s); t < t_end; ++t) {
    const float xt = to_f32(x[static_cast<int64_t>(t) * a.channels + c]);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < N - 1; ++j) {
      if (j < K - 1) acc += w[j] * hist[j];
    }
    acc += w[K - 1] * xt;
    out[static_cast<int64_t>(t) * a.channels + c] = from_f32<TX>(silu(acc));
#pragma unroll
    for (int j = 0; j < N - 2; ++j) {
      if (j < K - 2) hist[j] = hist[j + 1];
    }
    hist[K - 2] = xt;
  }
#pragma unroll
  for (int j = 0; j < N - 1; ++j) {
    if (j < K - 1) st[int64_t{j} * a.channels] = hist[j];
  }
}

// One thread per (token, channel): inputs before the sequence's first new token come from the
// slot's window, the others from x. The window is updated afterwards by conv1d_window_kernel.
template <typename TX>
__global__ void conv1d_parallel_kernel(ConvArgs a) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  pdl_wait();
  pdl_trigger();
  if (idx >= int64_t{a.tokens} * a.channels) return;
  const int t = static_cast<int>(idx / a.channels), c = static_cast<int>(idx % a.channels);
  const int s = a.token_seq[t], K = a.kernel, first = a.seq_starts[s];
  const int slot = a.slots[s];
  if (slot < 0) return;
  const float* st = a.state + static_cast<int64_t>(slot) * (K - 1) * a.channels + c;
  const TX* x = static_cast<const TX*>(a.x);
  const int i = t - first;
  float acc = 0.f;
  for (int j = 0; j < K; ++j) {
    const int src = i - (K - 1) + j;  // position relative to the first new token
    const float in = src >= 0 ? to_f32(x[(static_cast<int64_t>(first) + src) * a.channels + c])
                              : st[int64_t{K - 1 + src} * a.channels];
    acc += load_any(a.weight, a.weight_t, int64_t{c} * K + j) * in;
  }
  static_cast<TX*>(a.out)[idx] = from_f32<TX>(silu(acc));
}

// 8 consecutive channels of x row `p` as floats (a 16-byte load for bf16) / from floats.
template <typename TX>
__device__ __forceinline__ void load8_as_f32(const TX* p, float* f) {
  if constexpr (std::is_same_v<TX, bf16>) {
    unpack8(*reinterpret_cast<const uint4*>(p), f);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = to_f32(p[e]);
  }
}
template <typename TX>
__device__ __forceinline__ void store8_from_f32(TX* p, const float* f) {
  if constexpr (std::is_same_v<TX, bf16>) {
    *reinterpret_cast<uint4*>(p) = pack8(f);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) p[e] = from_f32<TX>(f[e]);
  }
}

// conv1d_parallel_kernel for kernel size 4: a thread takes 8 channels of kConvRun consecutive
// tokens, with the channels' 32 weights loaded once (16-byte loads for bf16 weights) and 16-byte
// loads and stores of bf16 rows; the same sums in the same order. (One element a thread, as
// conv1d_parallel_kernel, loads the weights again for every token: ncu on an H100 found that
// kernel and an 8-channel one without the token run bound by L1 throughput, 92%, at 320 GB/s of
// DRAM.) Grid x: runs of kConvRun tokens, y: groups of blockDim.x x 8 channels. Needs C % 8 == 0
// and 16-byte aligned x, out and weights.
constexpr int kConvRun = 16;
template <typename TX>
__global__ void conv1d_parallel8_kernel(ConvArgs a) {
  constexpr int K = 4;
  const int t0 = static_cast<int>(blockIdx.x) * kConvRun;
  const int c0 = (static_cast<int>(blockIdx.y) * blockDim.x + threadIdx.x) * 8;
  if (c0 >= a.channels) {
    pdl_wait();
    pdl_trigger();
    return;
  }
  float w[8][K];  // weights are immutable: loaded before the dependency wait
  if (a.weight_t == DType::BF16) {
    const uint4* wv = reinterpret_cast<const uint4*>(static_cast<const bf16*>(a.weight) +
                                                     static_cast<int64_t>(c0) * K);
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // weights (c0 + 2q, j) and (c0 + 2q + 1, j)
      float f[8];
      unpack8(__ldg(wv + q), f);
#pragma unroll
      for (int j = 0; j < K; ++j) {
        w[2 * q][j] = f[j];
        w[2 * q + 1][j] = f[K + j];
      }
    }
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e)
#pragma unroll
      for (int j = 0; j < K; ++j) w[e][j] = load_any(a.weight, a.weight_t, int64_t{c0 + e} * K + j);
  }
  pdl_wait();
  pdl_trigger();
  const int64_t C = a.channels;
  const TX* x = static_cast<const TX*>(a.x);
  const int t_end = min(t0 + kConvRun, a.tokens);
  for (int t = t0; t < t_end; ++t) {
    const int s = a.token_seq[t], first = a.seq_starts[s];
    const int slot = a.slots[s];
    if (slot < 0) continue;
    const float* st = a.state + static_cast<int64_t>(slot) * (K - 1) * C + c0;
    const int i = t - first;
    float in[K][8];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int src = i - (K - 1) + j;  // position relative to the first new token
      if (src >= 0) {
        load8_as_f32(x + (static_cast<int64_t>(first) + src) * C + c0, in[j]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) in[j][e] = st[int64_t{K - 1 + src} * C + e];
      }
    }
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      acc[e] = 0.f;
#pragma unroll
      for (int j = 0; j < K; ++j) acc[e] += w[e][j] * in[j][e];
      acc[e] = silu(acc[e]);
    }
    store8_from_f32(static_cast<TX*>(a.out) + static_cast<int64_t>(t) * C + c0, acc);
  }
}

// Channel c's window after the first n new tokens of a sequence whose first new token is row
// `first` of x: the last K - 1 inputs of [old window `st` | those n tokens], into `dst` (stride C).
template <typename TX>
__device__ void window_after(const ConvArgs& a, const float* st, int first, int n, int c,
                             float* dst) {
  const int K = a.kernel;
  const TX* x = static_cast<const TX*>(a.x);
  float win[kMaxConvKernel];
  for (int j = 0; j < K - 1; ++j) {
    const int m = n + j;  // index into [old window (K - 1) | new tokens]
    win[j] = m < K - 1 ? st[int64_t{m} * a.channels]
                       : to_f32(x[(static_cast<int64_t>(first) + m - (K - 1)) * a.channels + c]);
  }
  for (int j = 0; j < K - 1; ++j) dst[int64_t{j} * a.channels] = win[j];
}

// The window after the sequence's new tokens, back into its slot.
template <typename TX>
__global__ void conv1d_window_kernel(ConvArgs a) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  pdl_wait();
  pdl_trigger();
  if (idx >= int64_t{a.num_seqs} * a.channels) return;
  const int s = static_cast<int>(idx / a.channels), c = static_cast<int>(idx % a.channels);
  const int slot = a.slots[s];
  if (slot < 0) return;
  const int first = a.seq_starts[s], n = a.seq_starts[s + 1] - first;
  float* st = a.state + static_cast<int64_t>(slot) * (a.kernel - 1) * a.channels + c;
  window_after<TX>(a, st, first, n, c, st);  // reads the old window before writing it
}

// State saves: one thread per (sequence, channel) writes the window after each of the sequence's
// saves, the last K - 1 inputs of [old window | first `after` new tokens]. Runs before the window
// itself is updated.
template <typename TX>
__global__ void conv1d_save_kernel(ConvArgs a) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  pdl_wait();
  pdl_trigger();
  if (idx >= int64_t{a.num_seqs} * a.channels) return;
  const int s = static_cast<int>(idx / a.channels), c = static_cast<int>(idx % a.channels);
  const int slot = a.slots[s];
  if (slot < 0) return;
  const int64_t window = int64_t{a.kernel - 1} * a.channels;
  const float* st = a.state + slot * window + c;
  for (int i = a.save_starts[s]; i < a.save_starts[s + 1]; ++i)
    window_after<TX>(a, st, a.seq_starts[s], a.save_after[i], c,
                     a.saves + a.save_dests[i] * window + c);
}

// One warp per row of D (gated_rmsnorm_row): out = x * rsqrt(mean(x^2) + eps) * w * silu(z),
// rounded like the bf16 reference (the normalised x and its product with w are rounded to the
// activation type).
template <typename TX>
__global__ void gated_rmsnorm_kernel(const TX* __restrict__ x, const TX* __restrict__ z,
                                     const void* w, DType w_t, float eps, TX* __restrict__ out,
                                     int64_t rows, int64_t D) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  pdl_wait();
  pdl_trigger();
  if (row >= rows) return;
  gated_rmsnorm_row(
      x + row * D, z + row * D, [&](int64_t d) { return load_any(w, w_t, d); }, eps, D,
      out + row * D);
}

template <typename TX>
__global__ void sigmoid_mul_kernel(const TX* __restrict__ x, const TX* __restrict__ gate,
                                   TX* __restrict__ out, int64_t n, int64_t row, bool broadcast) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_f32(gate[broadcast ? i / row : i]);
    out[i] = from_f32<TX>(to_f32(x[i]) / (1.f + __expf(-g)));
  }
}

unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

}  // namespace

void launch_conv1d_silu(const ConvArgs& args, DType x_t, int32_t max_seq_len, cudaStream_t s) {
  if (args.tokens == 0 || args.num_seqs == 0) return;
  ConvArgs a = args;
  a.early_reads = pdl_early_reads();
  if (a.kernel < 2 || a.kernel > kMaxConvKernel)
    cuda_fail(__FILE__, __LINE__, "kernel", "conv1d kernel size must be in [2, 8]");
  constexpr int kThreads = 256;
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    if (a.num_saves > 0) {  // before any kernel moves the windows
      launch_k(conv1d_save_kernel<TX>, ceil_div(int64_t{a.num_seqs} * a.channels, kThreads),
               kThreads, 0, s, a);
    }
    if (max_seq_len <= kConvSequentialMaxTokens) {
      const int64_t n = int64_t{a.num_seqs} * a.channels;
      if (a.kernel == 4) {
        launch_k(conv1d_sequential_kernel<TX, 4>, ceil_div(n, kThreads), kThreads, 0, s, a);
      } else {
        launch_k(conv1d_sequential_kernel<TX, 0>, ceil_div(n, kThreads), kThreads, 0, s, a);
      }
      return;
    }
    if (a.kernel == 4 && a.channels % 8 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
        reinterpret_cast<uintptr_t>(a.out) % 16 == 0 &&
        reinterpret_cast<uintptr_t>(a.weight) % 16 == 0) {
      constexpr int kThreads8 = 128;
      launch_k(conv1d_parallel8_kernel<TX>,
               dim3(ceil_div(a.tokens, kConvRun), ceil_div(a.channels / 8, kThreads8)), kThreads8,
               0, s, a);
    } else {
      launch_k(conv1d_parallel_kernel<TX>, ceil_div(int64_t{a.tokens} * a.channels, kThreads),
               kThreads, 0, s, a);
    }
    launch_k(conv1d_window_kernel<TX>, ceil_div(int64_t{a.num_seqs} * a.channels, kThreads),
             kThreads, 0, s, a);
  });
}

void launch_gated_rmsnorm(const void* x, const void* z, DType x_t, const void* w, DType w_t,
                          float eps, void* out, int64_t rows, int64_t D, cudaStream_t s) {
  if (rows == 0) return;
  constexpr int kWarps = 8;
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    launch_k(gated_rmsnorm_kernel<TX>, ceil_div(rows, kWarps), kWarps * 32, 0, s,
             static_cast<const TX*>(x), static_cast<const TX*>(z), w, w_t, eps,
             static_cast<TX*>(out), rows, D);
  });
}

void launch_sigmoid_mul(const void* x, const void* gate, DType x_t, void* out, int64_t n,
                        int64_t row, bool broadcast, cudaStream_t s) {
  if (n == 0) return;
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    launch_k(sigmoid_mul_kernel<TX>, blocks_for(n, 256), 256, 0, s, static_cast<const TX*>(x),
             static_cast<const TX*>(gate), static_cast<TX*>(out), n, row, broadcast);
  });
}

}  // namespace syv::cuda
