// The CPU-vs-GPU op test fixture (cuda_ops_test.cpp, cuda_hybrid_ops_test.cpp): tensors holding
// the same values on both backends (f32 on the CPU, bf16 by default on the GPU), NaN-poisoned GPU
// outputs, relative L2 errors, and a random paged batch. Skips cleanly without a CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"

namespace syv {

inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float scale = 1.f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(d(rng)));  // exactly representable in bf16
  return v;
}

inline double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cpu_ = make_cpu_backend();
    gpu_ = make_cuda_backend(0);
  }

  // A tensor on each backend holding the same values: f32 on the CPU, `gpu_dtype` on the GPU.
  struct Pair {
    DeviceBuffer cbuf, gbuf;
    Tensor c, g;
  };
  Pair make(const std::vector<float>& v, std::initializer_list<int64_t> dims,
            DType gpu_dtype = DType::BF16) {
    Pair p;
    p.cbuf = cpu_->allocate(v.size() * 4 + 64);
    p.gbuf = gpu_->allocate(v.size() * dtype_size(gpu_dtype) + 64);
    p.c = Tensor(p.cbuf.data(), DType::F32, dims);
    p.g = Tensor(p.gbuf.data(), gpu_dtype, dims);
    cpu_->upload(p.c.data, v.data(), v.size() * 4);
    upload_as(p.g, v);
    return p;
  }
  // Output pair, the GPU side poisoned with NaN.
  Pair make_out(std::initializer_list<int64_t> dims, DType gpu_dtype = DType::BF16) {
    int64_t n = 1;
    for (auto d : dims) n *= d;
    Pair p = make(std::vector<float>(static_cast<size_t>(n), 0.f), dims, gpu_dtype);
    poison(p.g);
    return p;
  }
  void poison(const Tensor& t) {
    std::vector<uint8_t> nan(t.bytes(), 0xff);  // all-ones: NaN in f32, bf16 and f16
    gpu_->upload(t.data, nan.data(), nan.size());
  }
  void upload_as(const Tensor& t, const std::vector<float>& v) {
    if (t.dtype == DType::F32) {
      gpu_->upload(t.data, v.data(), v.size() * 4);
    } else if (t.dtype == DType::BF16) {
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
      gpu_->upload(t.data, b.data(), b.size() * 2);
    } else if (t.dtype == DType::F16) {
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_f16(v[i]);
      gpu_->upload(t.data, b.data(), b.size() * 2);
    } else {
      FAIL() << "upload_as: dtype";
    }
  }
  std::vector<float> down_gpu(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    if (t.dtype == DType::F32) {
      gpu_->download(out.data(), t.data, out.size() * 4);
    } else {
      std::vector<uint16_t> b(out.size());
      gpu_->download(b.data(), t.data, b.size() * 2);
      for (size_t i = 0; i < b.size(); ++i)
        out[i] = t.dtype == DType::BF16 ? bf16_to_f32(b[i]) : f16_to_f32(b[i]);
    }
    return out;
  }
  std::vector<float> down_cpu(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    cpu_->download(out.data(), t.data, out.size() * 4);
    return out;
  }
  void expect_close(const Pair& p, double bound, const std::string& what) {
    const double e = rel_l2(down_gpu(p.g), down_cpu(p.c));
    EXPECT_LT(e, bound) << what << ": relative L2 error " << e;
  }

  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
  std::mt19937 rng_{1234};
};

// A batch of sequences with `news[s]` new tokens ending at context `ctx[s]`, pages scattered over a
// pool of `pool` pages in random order.
inline Batch make_batch(const std::vector<int>& news, const std::vector<int>& ctx, int page_size,
                        int pool, std::mt19937& rng) {
  Batch b;
  const int S = static_cast<int>(news.size());
  int max_pages = 1;
  for (int s = 0; s < S; ++s) max_pages = std::max(max_pages, (ctx[s] + page_size - 1) / page_size);
  b.max_pages_per_seq = max_pages;
  std::vector<int32_t> ids(static_cast<size_t>(pool));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  b.seq_starts.push_back(0);
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < news[s]; ++i) {
      b.token_ids.push_back(static_cast<int32_t>(rng() % 1000));
      b.positions.push_back(ctx[s] - news[s] + i);
    }
    b.seq_starts.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.context_lens.push_back(ctx[s]);
    const int pages = (ctx[s] + page_size - 1) / page_size;
    for (int j = 0; j < max_pages; ++j) b.page_table.push_back(j < pages ? ids.at(next++) : -1);
    b.logit_rows.push_back(b.seq_starts.back() - 1);
  }
  return b;
}

}  // namespace syv
