// Batch-invariant mode on the CPU backend (Backend::set_batch_invariant): linear() rows are
// bit-identical at every T, and so are a real model's logits for one-shot prefill, token-by-token
// decode and chunked prefill packed with another sequence. Also prints what the default mode
// (OpenBLAS sgemv row by row up to 8 tokens, sgemm above) does to the same rows: it is not
// invariant above 8 tokens, and is at 1..8 (a verify step's rows equal the decode rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/log.h"
#include "model/model.h"

namespace syv {
namespace {

struct Shape {
  int64_t n, k;
};
const Shape kShapes[] = {{64, 64}, {130, 48}, {1001, 24}, {7, 13}, {256, 512}, {96, 160}};
const int64_t kTokens[] = {1, 2, 3, 4, 5, 8, 17, 64, 300};
constexpr int64_t kMaxT = 300;
constexpr long long kRowsChecked = 1 + 2 + 3 + 4 + 5 + 8 + 17 + 64 + 300;

// Rows of linear(x[0:T]) that differ bitwise from linear(x[r:r+1]), over `tokens` (each <= kMaxT).
int64_t differing_rows(Backend& cpu, const Shape& s, const std::vector<float>& x,
                       const std::vector<float>& w,
                       std::vector<int64_t> tokens = {std::begin(kTokens), std::end(kTokens)}) {
  DeviceBuffer xb = cpu.allocate(x.size() * 4), wb = cpu.allocate(w.size() * 4);
  DeviceBuffer ob = cpu.allocate(static_cast<size_t>(kMaxT * s.n) * 4);
  DeviceBuffer rb = cpu.allocate(static_cast<size_t>(kMaxT * s.n) * 4);
  cpu.upload(xb.data(), x.data(), x.size() * 4);
  cpu.upload(wb.data(), w.data(), w.size() * 4);
  const Tensor wt(wb.data(), DType::F32, {s.n, s.k});
  const float* xp = static_cast<const float*>(xb.data());
  float* ref = static_cast<float*>(rb.data());
  for (int64_t r = 0; r < kMaxT; ++r) {
    Tensor o(ref + r * s.n, DType::F32, {1, s.n});
    cpu.linear(Tensor(const_cast<float*>(xp + r * s.k), DType::F32, {1, s.k}), wt, Tensor(), o);
  }
  int64_t bad = 0;
  for (int64_t T : tokens) {
    Tensor o(ob.data(), DType::F32, {T, s.n});
    cpu.linear(Tensor(xb.data(), DType::F32, {T, s.k}), wt, Tensor(), o);
    for (int64_t r = 0; r < T; ++r)
      bad += std::memcmp(o.as<float>() + r * s.n, ref + r * s.n, static_cast<size_t>(s.n) * 4) != 0;
  }
  return bad;
}

// x [kMaxT, s.k], then w [s.n, s.k], uniform in [-1, 1).
void random_operands(const Shape& s, std::mt19937& rng, std::vector<float>& x,
                     std::vector<float>& w) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  x.resize(static_cast<size_t>(kMaxT * s.k));
  w.resize(static_cast<size_t>(s.n * s.k));
  for (auto& v : x) v = d(rng);
  for (auto& v : w) v = d(rng);
}

TEST(CpuBatchInvariance, LinearRowsAreBitIdenticalAtEveryTokenCount) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::unique_ptr<Backend> blas = make_cpu_backend();
  cpu->set_batch_invariant(true);
  ASSERT_TRUE(cpu->batch_invariant());
  EXPECT_FALSE(blas->batch_invariant());
  std::mt19937 rng(1);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("N " + std::to_string(s.n) + " K " + std::to_string(s.k));
    std::vector<float> x, w;
    random_operands(s, rng, x, w);
    EXPECT_EQ(differing_rows(*cpu, s, x, w), 0);
    std::printf(
        "N %5lld K %5lld: default mode (OpenBLAS): %lld of %lld rows differ from the row "
        "computed alone\n",
        static_cast<long long>(s.n), static_cast<long long>(s.k),
        static_cast<long long>(differing_rows(*blas, s, x, w)), kRowsChecked);
    // Close to sgemm (both sum in fp32, in different orders).
    DeviceBuffer xb = cpu->allocate(x.size() * 4), wb = cpu->allocate(w.size() * 4);
    DeviceBuffer o1 = cpu->allocate(static_cast<size_t>(kMaxT * s.n) * 4);
    DeviceBuffer o2 = cpu->allocate(static_cast<size_t>(kMaxT * s.n) * 4);
    cpu->upload(xb.data(), x.data(), x.size() * 4);
    cpu->upload(wb.data(), w.data(), w.size() * 4);
    Tensor xt(xb.data(), DType::F32, {kMaxT, s.k}), wt(wb.data(), DType::F32, {s.n, s.k});
    Tensor t1(o1.data(), DType::F32, {kMaxT, s.n}), t2(o2.data(), DType::F32, {kMaxT, s.n});
    cpu->linear(xt, wt, Tensor(), t1);
    blas->linear(xt, wt, Tensor(), t2);
    double num = 0, den = 0;
    for (int64_t i = 0; i < kMaxT * s.n; ++i) {
      const double a = t1.as<float>()[i], b = t2.as<float>()[i];
      num += (a - b) * (a - b);
      den += b * b;
    }
    EXPECT_LT(std::sqrt(num / den), 1e-5) << "relative L2 against sgemm";
  }
}

// The default mode's small steps (a verify step of up to 7 drafts, a decode step of up to 8
// sequences): every row is the one-token row bit for bit, so speculation's verify rows are exactly
// the decode rows they stand for (cpu_linear.cpp: sgemv row by row; sgemm rows differ).
TEST(CpuBatchInvariance, DefaultModeRowsOfUpTo8TokensEqualTheOneTokenRow) {
  std::unique_ptr<Backend> blas = make_cpu_backend();
  ASSERT_FALSE(blas->batch_invariant());
  std::mt19937 rng(2);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("N " + std::to_string(s.n) + " K " + std::to_string(s.k));
    std::vector<float> x, w;
    random_operands(s, rng, x, w);
    EXPECT_EQ(differing_rows(*blas, s, x, w, {2, 3, 4, 5, 6, 7, 8}), 0);
  }
}

TEST(CpuBatchInvariance, BiasIsAddedInBothModes) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  cpu->set_batch_invariant(true);
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 0, 0, 0, 1, 0}, bias = {10, 20};
  DeviceBuffer xb = cpu->allocate(36), wb = cpu->allocate(24), bb = cpu->allocate(8),
               ob = cpu->allocate(24);
  cpu->upload(xb.data(), x.data(), 36);
  cpu->upload(wb.data(), w.data(), 24);
  cpu->upload(bb.data(), bias.data(), 8);
  Tensor o(ob.data(), DType::F32, {3, 2});
  cpu->linear(Tensor(xb.data(), DType::F32, {3, 3}), Tensor(wb.data(), DType::F32, {2, 3}),
              Tensor(bb.data(), DType::F32, {2}), o);
  const std::vector<float> want = {11, 22, 14, 25, 17, 28};
  EXPECT_EQ(std::vector<float>(o.as<float>(), o.as<float>() + 6), want);
}

// The routed experts (hybrid MoE models): a token's output is the same alone or among others
// routed to the same experts (OpenBLAS would see a different M per expert).
TEST(CpuBatchInvariance, MoeExpertRowsAreBitIdentical) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  cpu->set_batch_invariant(true);
  constexpr int64_t T = 37, H = 48, I = 40, E = 6, K = 2;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  auto host = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(rng);
    return v;
  };
  const std::vector<float> x = host(T * H), gu = host(E * 2 * I * H), dn = host(E * H * I);
  std::vector<int32_t> ids(static_cast<size_t>(T * K));
  std::vector<float> wts(static_cast<size_t>(T * K));
  for (int64_t t = 0; t < T; ++t) {
    ids[static_cast<size_t>(t * K)] = static_cast<int32_t>(t % E);
    ids[static_cast<size_t>(t * K + 1)] = static_cast<int32_t>((t * 7 + 1) % E);
    wts[static_cast<size_t>(t * K)] = 0.75f;
    wts[static_cast<size_t>(t * K + 1)] = 0.25f;
  }
  auto buf = [&](const void* src, size_t bytes) {
    DeviceBuffer b = cpu->allocate(bytes);
    cpu->upload(b.data(), src, bytes);
    return b;
  };
  DeviceBuffer xb = buf(x.data(), x.size() * 4), gb = buf(gu.data(), gu.size() * 4),
               db = buf(dn.data(), dn.size() * 4), ib = buf(ids.data(), ids.size() * 4),
               wb = buf(wts.data(), wts.size() * 4), ob = cpu->allocate(T * H * 4),
               rb = cpu->allocate(H * 4);
  const Tensor gut(gb.data(), DType::F32, {E, 2 * I, H}), dnt(db.data(), DType::F32, {E, H, I});
  Tensor out(ob.data(), DType::F32, {T, H});
  cpu->moe_experts(Tensor(xb.data(), DType::F32, {T, H}), Tensor(ib.data(), DType::I32, {T, K}),
                   Tensor(wb.data(), DType::F32, {T, K}), gut, dnt, out);
  for (int64_t t = 0; t < T; ++t) {
    Tensor one(rb.data(), DType::F32, {1, H});
    cpu->moe_experts(Tensor(static_cast<float*>(xb.data()) + t * H, DType::F32, {1, H}),
                     Tensor(static_cast<int32_t*>(ib.data()) + t * K, DType::I32, {1, K}),
                     Tensor(static_cast<float*>(wb.data()) + t * K, DType::F32, {1, K}), gut, dnt,
                     one);
    EXPECT_EQ(std::memcmp(one.data, out.as<float>() + t * H, H * 4), 0) << "token " << t;
  }
}

// The exactness the engine promises, at the logits: every position of a sequence gets the same
// bits alone in one prefill, token by token, and in chunks packed with another sequence.
TEST(CpuBatchInvariance, ModelLogitsOfEveryPositionAreBitIdentical) {
  set_log_level(LogLevel::WARN);
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  cpu->set_batch_invariant(true);
  auto loaded =
      load_model(std::string(SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/untied_mha_hd32", *cpu);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  Model& model = **loaded;
  constexpr int32_t kPage = 8, kMaxPages = 16;
  CacheConfig cc;
  cc.page_size = kPage;
  cc.num_pages = 6 * kMaxPages;
  auto store = make_cache_store(model, cc);
  ASSERT_TRUE(store.ok()) << store.message();
  const int64_t V = model.config().vocab_size;
  std::mt19937 rng(9);
  std::vector<int32_t> a(100), b(45);
  for (auto& t : a) t = static_cast<int32_t>(rng() % V);
  for (auto& t : b) t = static_cast<int32_t>(rng() % V);

  struct Part {
    const std::vector<int32_t>* tokens;
    int32_t first, count, block;
  };
  // Runs one forward; appends each part's logits rows to out[part's sequence].
  auto forward = [&](const std::vector<Part>& parts, std::vector<float>* out_a,
                     std::vector<float>* out_b) {
    Batch bt;
    bt.max_pages_per_seq = kMaxPages;
    bt.seq_starts.push_back(0);
    for (const Part& p : parts) {
      for (int32_t i = 0; i < p.count; ++i) {
        bt.logit_rows.push_back(bt.num_tokens());
        bt.token_ids.push_back((*p.tokens)[static_cast<size_t>(p.first + i)]);
        bt.positions.push_back(p.first + i);
      }
      bt.seq_starts.push_back(bt.num_tokens());
      bt.context_lens.push_back(p.first + p.count);
      for (int32_t j = 0; j < kMaxPages; ++j) bt.page_table.push_back(p.block * kMaxPages + j);
    }
    Tensor logits = model.forward(bt);
    std::vector<float> host(static_cast<size_t>(logits.numel()));
    cpu->download(host.data(), logits.data, host.size() * 4);
    size_t at = 0;
    for (const Part& p : parts) {
      std::vector<float>* out = p.tokens == &a ? out_a : out_b;
      out->insert(out->end(), host.begin() + static_cast<int64_t>(at * V),
                  host.begin() + static_cast<int64_t>((at + p.count) * V));
      at += static_cast<size_t>(p.count);
    }
  };
  const int32_t la = static_cast<int32_t>(a.size()), lb = static_cast<int32_t>(b.size());
  std::vector<float> a1, b1, a2, b2, a3, b3;
  forward({{&a, 0, la, 0}}, &a1, &b1);
  forward({{&b, 0, lb, 1}}, &a1, &b1);
  for (int32_t p = 0; p < la; ++p) forward({{&a, p, 1, 2}}, &a2, &b2);
  for (int32_t p = 0; p < lb; ++p) forward({{&b, p, 1, 3}}, &a2, &b2);
  const int32_t sa[] = {1, 7, 33, 2, 17}, sb[] = {3, 1, 20, 1};
  for (int32_t step = 0, pa = 0, pb = 0; pa < la || pb < lb; ++step) {
    const int32_t na = std::min(sa[step % 5], la - pa), nb = std::min(sb[step % 4], lb - pb);
    std::vector<Part> parts;
    if (na > 0) parts.push_back({&a, pa, na, 4});
    if (nb > 0) parts.push_back({&b, pb, nb, 5});
    forward(parts, &a3, &b3);
    pa += na;
    pb += nb;
  }
  ASSERT_EQ(a1.size(), static_cast<size_t>(la * V));
  ASSERT_EQ(b1.size(), static_cast<size_t>(lb * V));
  EXPECT_TRUE(a1 == a2) << "sequence a: token-by-token decode vs one-shot prefill";
  EXPECT_TRUE(a1 == a3) << "sequence a: chunked + packed vs one-shot prefill";
  EXPECT_TRUE(b1 == b2) << "sequence b: token-by-token decode vs one-shot prefill";
  EXPECT_TRUE(b1 == b3) << "sequence b: chunked + packed vs one-shot prefill";
}

// What the mode costs on this machine (Release builds mean something; Debug does not).
TEST(CpuBatchInvariance, PrintsCost) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  const int64_t N = 512, K = 1024;
  DeviceBuffer xb = cpu->allocate(static_cast<size_t>(64 * K) * 4),
               wb = cpu->allocate(static_cast<size_t>(N * K) * 4),
               ob = cpu->allocate(static_cast<size_t>(64 * N) * 4);
  std::fill_n(static_cast<float*>(xb.data()), 64 * K, 0.5f);
  std::fill_n(static_cast<float*>(wb.data()), N * K, 0.25f);
  for (int64_t T : {int64_t{1}, int64_t{64}}) {
    double ms[2];
    for (int mode = 0; mode < 2; ++mode) {
      cpu->set_batch_invariant(mode == 1);
      Tensor o(ob.data(), DType::F32, {T, N});
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 3; ++i)
        cpu->linear(Tensor(xb.data(), DType::F32, {T, K}), Tensor(wb.data(), DType::F32, {N, K}),
                    Tensor(), o);
      ms[mode] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
          3;
    }
    std::printf("linear %lldx%lld, T %lld: default %.3f ms, batch-invariant %.3f ms (x%.1f)\n",
                static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(T),
                ms[0], ms[1], ms[1] / ms[0]);
  }
}

}  // namespace
}  // namespace syv
