// Backend::sample() on the GPU against the CPU sampler (engine/sampler.h): greedy ids equal,
// penalised logits bit-equal, the kept sets of top-k / top-p / min-p equal the CPU's, the draw
// follows the CPU's renormalised distribution (a grid of uniforms gives each token a share within
// 2 draws of p * N), and the same uniforms give the same ids. Skipped when no CUDA device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "engine/device_sampling.h"
#include "engine/sampler.h"

namespace syv {
namespace {

class GpuSampling : public ::testing::Test {
 public:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    gpu_ = make_cuda_backend(0);
  }

  // Samples R rows of logits [R, V] (host) on the GPU; returns the ids.
  std::vector<int32_t> run(const std::vector<float>& logits, int64_t V,
                           const std::vector<SampleRow>& rows,
                           const std::vector<SamplePenalty>& penalties,
                           std::vector<float>* processed = nullptr) {
    const int64_t R = static_cast<int64_t>(rows.size());
    DeviceBuffer lb = gpu_->allocate(logits.size() * 4);
    gpu_->upload(lb.data(), logits.data(), logits.size() * 4);
    Tensor lt(lb.data(), DType::F32, {R, V});
    DeviceBuffer pb;
    Tensor pt;
    if (processed) {
      pb = gpu_->allocate(logits.size() * 4);
      pt = Tensor(pb.data(), DType::F32, {R, V});
    }
    std::vector<int32_t> ids(static_cast<size_t>(R), -7);
    gpu_->sample(lt, rows, penalties, ids.data(), processed ? &pt : nullptr);
    if (processed) {
      processed->resize(logits.size());
      gpu_->download(processed->data(), pb.data(), logits.size() * 4);
    }
    return ids;
  }

  std::unique_ptr<CudaBackend> gpu_;
};

std::vector<float> random_logits(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// The CPU sampler's distribution over one row (engine/sampler.cpp's filters, written out).
std::map<int32_t, double> cpu_distribution(const std::vector<float>& row, const SampleRow& p) {
  const int32_t V = static_cast<int32_t>(row.size());
  std::vector<std::pair<float, int32_t>> cand;
  for (int32_t v = 0; v < V; ++v) cand.push_back({row[static_cast<size_t>(v)], v});
  std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  size_t keep = p.top_k > 0 && p.top_k < V ? static_cast<size_t>(p.top_k) : cand.size();
  std::vector<double> probs(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((cand[i].first - cand[0].first) / static_cast<double>(p.temperature));
    total += probs[i];
  }
  if (p.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += probs[i] / total;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    size_t cut = 1;
    while (cut < keep && probs[cut] / total >= p.min_p * (probs[0] / total)) ++cut;
    keep = cut;
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += probs[i];
  std::map<int32_t, double> dist;
  for (size_t i = 0; i < keep; ++i) dist[cand[i].second] = probs[i] / kept;
  return dist;
}

// N rows of the same logits with uniforms (i + 0.5) / N: each kept token must be drawn about
// p * N times (within 2), and no other token at all.
void expect_distribution(GpuSampling& t, const std::vector<float>& row, SampleRow p, int N,
                         std::vector<int32_t> (GpuSampling::*run)(
                             const std::vector<float>&, int64_t, const std::vector<SampleRow>&,
                             const std::vector<SamplePenalty>&, std::vector<float>*)) {
  const int64_t V = static_cast<int64_t>(row.size());
  std::vector<float> logits;
  std::vector<SampleRow> rows;
  for (int i = 0; i < N; ++i) {
    logits.insert(logits.end(), row.begin(), row.end());
    p.uniform = (i + 0.5) / N;
    rows.push_back(p);
  }
  const std::vector<int32_t> ids = (t.*run)(logits, V, rows, {}, nullptr);
  const std::map<int32_t, double> dist = cpu_distribution(row, p);
  std::map<int32_t, int> counts;
  for (int32_t id : ids) ++counts[id];
  for (const auto& [id, c] : counts)
    EXPECT_TRUE(dist.count(id)) << "token " << id << " drawn " << c
                                << " times, outside the kept set";
  for (const auto& [id, prob] : dist)
    EXPECT_NEAR(counts[id], prob * N, 2.0) << "token " << id << " p " << prob;
}

}  // namespace

TEST_F(GpuSampling, GreedyEqualsCpuArgmaxWithTies) {
  const int64_t V = 151936, R = 8;
  std::vector<float> logits = random_logits(R * V, 1, 3.f);
  logits[static_cast<size_t>(3 * V + 100)] = 50.f;  // a tie: the lower id wins
  logits[static_cast<size_t>(3 * V + 90000)] = 50.f;
  std::vector<SampleRow> rows(static_cast<size_t>(R));
  const std::vector<int32_t> ids = run(logits, V, rows, {});
  Sampler cpu;
  SamplingParams sp;
  sp.temperature = 0.f;
  for (int64_t r = 0; r < R; ++r) {
    SamplerState st(0);
    EXPECT_EQ(
        ids[static_cast<size_t>(r)],
        cpu.sample(&logits[static_cast<size_t>(r * V)], static_cast<int32_t>(V), sp, st).token_id)
        << "row " << r;
  }
  EXPECT_EQ(ids[3], 100);
}

TEST_F(GpuSampling, PenalisedLogitsEqualCpuExactly) {
  const int64_t V = 151936;
  const std::vector<float> row = random_logits(V, 2, 4.f);
  SamplingParams sp;
  sp.temperature = 0.f;
  sp.repetition_penalty = 1.3f;
  sp.presence_penalty = 0.4f;
  sp.frequency_penalty = 0.25f;
  SamplerState st(5);
  st.add_prompt({1, 2, 3, 3, 500, 151935, 7000});
  for (int32_t t : {3, 3, 9, 9, 9, 42, 151935, 100000}) st.add_output(t);
  std::vector<SamplePenalty> pen;
  std::vector<SampleRow> rows = {make_sample_row(sp, st, pen)};
  // A second row with only the additive penalties, a third with only repetition.
  SamplingParams sp2 = sp;
  sp2.repetition_penalty = 1.0f;
  rows.push_back(make_sample_row(sp2, st, pen));
  SamplingParams sp3 = sp;
  sp3.presence_penalty = sp3.frequency_penalty = 0.0f;
  rows.push_back(make_sample_row(sp3, st, pen));
  std::vector<float> logits;
  for (int i = 0; i < 3; ++i) logits.insert(logits.end(), row.begin(), row.end());
  std::vector<float> processed;
  const std::vector<int32_t> ids = run(logits, V, rows, pen, &processed);
  const SamplingParams* sps[3] = {&sp, &sp2, &sp3};
  for (int r = 0; r < 3; ++r) {
    std::vector<float> ref = row;
    apply_penalties(ref.data(), static_cast<int32_t>(V), *sps[r], st);
    int diffs = 0;
    for (int64_t v = 0; v < V; ++v)
      diffs += std::memcmp(&ref[static_cast<size_t>(v)], &processed[static_cast<size_t>(r * V + v)],
                           4) != 0;
    EXPECT_EQ(diffs, 0) << "row " << r;
    EXPECT_EQ(ids[static_cast<size_t>(r)], std::max_element(ref.begin(), ref.end()) - ref.begin());
  }
  EXPECT_NE(processed[3], row[3]);  // the penalty did something
}

TEST_F(GpuSampling, TemperatureFollowsCpuDistribution) {
  std::vector<float> row = random_logits(64, 3, 1.f);
  SampleRow p;
  p.temperature = 0.7f;
  expect_distribution(*this, row, p, 4000, &GpuSampling::run);
}

TEST_F(GpuSampling, TopKKeepsExactlyTheTopK) {
  std::vector<float> row = random_logits(151936, 4, 1.f);
  for (auto& x : row) x -= 8.f;  // a negligible tail
  for (int i = 0; i < 12; ++i) row[static_cast<size_t>(1000 * i + 7)] = 6.f - 0.1f * i;
  row[5000] = row[4007];  // ties with id 4007 at the boundary (k = 5): 4007 stays, 5000 goes
  SampleRow p;
  p.temperature = 1.0f;
  p.top_k = 5;
  expect_distribution(*this, row, p, 2000, &GpuSampling::run);
}

TEST_F(GpuSampling, TopPKeepsTheNucleus) {
  std::vector<float> row = random_logits(32000, 5, 1.f);
  for (auto& x : row) x -= 8.f;
  for (int i = 0; i < 10; ++i) row[static_cast<size_t>(3000 * i + 11)] = 9.f - 0.3f * i;
  SampleRow p;
  p.temperature = 0.9f;
  p.top_p = 0.8f;
  expect_distribution(*this, row, p, 2000, &GpuSampling::run);
  p.top_k = 3;  // top-p relative to the top-k mass
  expect_distribution(*this, row, p, 2000, &GpuSampling::run);
}

TEST_F(GpuSampling, MinPDropsUnlikelyTokens) {
  std::vector<float> row = random_logits(32000, 6, 1.f);
  for (auto& x : row) x -= 8.f;
  for (int i = 0; i < 10; ++i) row[static_cast<size_t>(3000 * i + 13)] = 9.f - 0.45f * i;
  SampleRow p;
  p.temperature = 1.0f;
  p.min_p = 0.1f;
  expect_distribution(*this, row, p, 2000, &GpuSampling::run);
  p.top_p = 0.95f;
  expect_distribution(*this, row, p, 2000, &GpuSampling::run);
}

TEST_F(GpuSampling, SameSeedSameIds) {
  const int64_t V = 151936, R = 16;
  const std::vector<float> logits = random_logits(R * V, 7, 2.f);
  auto draw = [&](uint64_t seed) {
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.top_p = 0.95f;
    sp.frequency_penalty = 0.5f;
    std::vector<SampleRow> rows;
    std::vector<SamplePenalty> pen;
    SamplerState st(sample_seed(seed, 0));
    st.add_output(17);
    for (int64_t r = 0; r < R; ++r) rows.push_back(make_sample_row(sp, st, pen));
    return run(logits, V, rows, pen);
  };
  const std::vector<int32_t> a = draw(1234), b = draw(1234), c = draw(99);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (int32_t id : a) EXPECT_TRUE(id >= 0 && id < V);
}

// Not a bound: prints the wall time of one sample() call (upload, kernels, id download) for the
// 8B vocab, greedy and top-k/top-p with penalties, at 1 and 64 rows.
TEST_F(GpuSampling, PrintsCost) {
  const int64_t V = 151936;
  for (int64_t R : {1, 64}) {
    const std::vector<float> logits = random_logits(R * V, 8, 2.f);
    DeviceBuffer lb = gpu_->allocate(logits.size() * 4);
    gpu_->upload(lb.data(), logits.data(), logits.size() * 4);
    Tensor lt(lb.data(), DType::F32, {R, V});
    for (int mode = 0; mode < 2; ++mode) {
      SamplingParams sp;
      sp.temperature = mode == 0 ? 0.f : 0.8f;
      sp.top_k = mode == 0 ? 0 : 50;
      sp.top_p = mode == 0 ? 1.f : 0.95f;
      sp.repetition_penalty = mode == 0 ? 1.f : 1.1f;
      SamplerState st(1);
      st.add_prompt(std::vector<int32_t>(300, 5));
      for (int32_t t = 0; t < 200; ++t) st.add_output(t * 7);
      std::vector<SamplePenalty> pen;
      std::vector<SampleRow> rows;
      for (int64_t r = 0; r < R; ++r) rows.push_back(make_sample_row(sp, st, pen));
      std::vector<int32_t> ids(static_cast<size_t>(R));
      std::vector<double> us;
      for (int i = 0; i < 60; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        gpu_->sample(lt, rows, pen, ids.data());
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(us.begin() + 10, us.end());
      std::printf("sample() cost: rows %ld, %s: median %.1f us\n", static_cast<long>(R),
                  mode == 0 ? "greedy" : "T 0.8 top-k 50 top-p 0.95 rep 1.1", us[35]);
    }
  }
}

}  // namespace syv
