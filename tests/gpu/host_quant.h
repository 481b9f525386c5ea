// Random quantized weights in backend/weight.h's canonical layouts (fp8 block-scaled, int4
// groups), held on the host and put on a backend as Weights: the GPU tests of quantized kernels
// (quant_linear_gpu_test.cpp, moe_quant_gemv_gpu_test.cpp) give both backends the same bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "model/quant_weights.h"

namespace syv {

// Host copy of a canonical quantized weight, and views of it on a backend.
struct HostQuant {
  WeightFormat format = WeightFormat::kFp8Block;
  int64_t n = 0, k = 0;
  int32_t block_n = 0, block_k = 0, group_size = 0;
  std::vector<uint8_t> data, zeros;
  std::vector<float> scales;
  std::vector<int32_t> g_idx;
  std::vector<int32_t> perm;  // act-order permuted (backend/weight.h perm)
  int64_t scale_rows = 0, scale_cols = 0;
};

struct OnBackend {
  DeviceBuffer data, scales, zeros, g_idx, perm;
  Weight w;
};

inline OnBackend put(Backend& b, const HostQuant& h) {
  OnBackend o;
  auto up = [&](DeviceBuffer& buf, const void* src, size_t bytes) {
    buf = b.allocate(bytes + 16);
    b.upload(buf.data(), src, bytes);
  };
  up(o.data, h.data.data(), h.data.size());
  up(o.scales, h.scales.data(), h.scales.size() * 4);
  Weight& w = o.w;
  w.format = h.format;
  w.n = h.n;
  w.k = h.k;
  w.block_n = h.block_n;
  w.block_k = h.block_k;
  w.group_size = h.group_size;
  if (h.format == WeightFormat::kFp8Block) {
    w.tensor = Tensor(o.data.data(), DType::F8E4M3, {h.n, h.k});
  } else {
    w.tensor = Tensor(o.data.data(), DType::U4X2, {h.n, h.k / 2});
  }
  w.scales = Tensor(o.scales.data(), DType::F32, {h.scale_rows, h.scale_cols});
  if (!h.zeros.empty()) {
    up(o.zeros, h.zeros.data(), h.zeros.size());
    w.zeros = Tensor(o.zeros.data(), DType::U8, {h.n, h.scale_cols});
  }
  if (!h.g_idx.empty()) {
    up(o.g_idx, h.g_idx.data(), h.g_idx.size() * 4);
    w.g_idx = Tensor(o.g_idx.data(), DType::I32, {h.k});
  }
  if (!h.perm.empty()) {
    up(o.perm, h.perm.data(), h.perm.size() * 4);
    w.perm = Tensor(o.perm.data(), DType::I32, {h.k});
  }
  b.synchronize();
  return o;
}

// Random e4m3 bytes (no NaN: 0x7f / 0xff) and positive scales around 1/64.
inline HostQuant random_fp8(int64_t n, int64_t k, int32_t bn, int32_t bk, std::mt19937& rng) {
  HostQuant h;
  h.format = WeightFormat::kFp8Block;
  h.n = n;
  h.k = k;
  h.block_n = bn;
  h.block_k = bk;
  h.scale_rows = (n + bn - 1) / bn;
  h.scale_cols = (k + bk - 1) / bk;
  h.data.resize(static_cast<size_t>(n * k));
  for (auto& b : h.data) {
    b = static_cast<uint8_t>(rng() & 0xff);
    if ((b & 0x7f) == 0x7f) b = 0x3f;
  }
  std::uniform_real_distribution<float> s(0.5f / 64, 2.f / 64);
  h.scales.resize(static_cast<size_t>(h.scale_rows * h.scale_cols));
  for (auto& v : h.scales) v = s(rng);
  return h;
}

// Random nibbles; zero points in [0, 16] (or none: z = 8); act-order groups when `act_order`.
inline HostQuant random_int4(int64_t n, int64_t k, int32_t gs, bool zeros, bool act_order,
                             std::mt19937& rng) {
  HostQuant h;
  h.format = WeightFormat::kInt4Group;
  h.n = n;
  h.k = k;
  h.group_size = gs;
  h.scale_rows = n;
  h.scale_cols = k / gs;
  h.data.resize(static_cast<size_t>(n * k / 2));
  for (auto& b : h.data) b = static_cast<uint8_t>(rng() & 0xff);
  std::uniform_real_distribution<float> s(0.5f / 16, 2.f / 16);
  h.scales.resize(static_cast<size_t>(n * h.scale_cols));
  for (auto& v : h.scales) v = s(rng);
  if (zeros) {
    h.zeros.resize(static_cast<size_t>(n * h.scale_cols));
    for (auto& z : h.zeros) z = static_cast<uint8_t>(rng() % 17);
  }
  if (act_order) {
    h.g_idx.resize(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) h.g_idx[static_cast<size_t>(i)] = static_cast<int32_t>(i / gs);
    std::shuffle(h.g_idx.begin(), h.g_idx.end(), rng);
  }
  return h;
}

// An act-order weight re-laid as the loader does where the backend takes it
// (SYV_ACT_ORDER_PERM=1 on CUDA): permute_act_order (model/quant_weights.h).
inline HostQuant permuted(const HostQuant& h) {
  HostQuantWeight w;
  w.format = h.format;
  w.n = h.n;
  w.k = h.k;
  w.group_size = h.group_size;
  w.data = h.data;
  w.scales = h.scales;
  w.scale_rows = h.scale_rows;
  w.scale_cols = h.scale_cols;
  w.zeros = h.zeros;
  w.g_idx = h.g_idx;
  EXPECT_TRUE(permute_act_order(w));
  HostQuant out = h;
  out.data = w.data;
  out.g_idx.clear();
  out.perm = w.perm;
  return out;
}

}  // namespace syv
