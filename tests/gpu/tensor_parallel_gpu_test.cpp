// Tensor parallelism on GPUs (model/tensor_parallel.h over backend/cuda/nccl_tp_group.h): the
// NCCL all-reduce itself (f32 and bf16, every rank on its own thread and device; and captured
// into a CUDA graph on every rank, then replayed) over every visible GPU, one included; a model
// "split" over 1 rank through the NCCL group with CUDA graphs on against the plain model on the
// same GPU (the same arithmetic: bit-equal tokens and logprobs, every decode step a graph
// replay); and whole models split over 2 (and, with 4 GPUs, 4) ranks against one GPU, graphs off
// and on: the same greedy tokens up to near-ties and the same prompt logprobs within bf16
// rounding, through the engine (batched, chunked, prefix hits). Skipped (with the reason)
// without NCCL in the build or with fewer CUDA devices than a test's ranks; run by
// tools/device/tp_check.sh (the N = 1 tests on one GPU, the rest on a machine with several).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_tp_group.h"
#include "core/dtype.h"
#include "model/prepare_model.h"
#include "model/tensor_parallel.h"
#include "unit/engine_harness.h"
#include "unit/tensor_parallel_requests.h"

namespace syv::testing {
namespace {

std::string source_dir() {
  const char* root = std::getenv("SYV_SOURCE_DIR");
  return root ? root : SYV_SOURCE_DIR;
}

#define SYV_SKIP_WITHOUT_RANKS(n)                                                    \
  do {                                                                               \
    if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL (SYV_HAVE_NCCL)"; \
    if (cuda_device_count() < (n))                                                   \
      GTEST_SKIP() << "tensor parallelism over " << (n) << " ranks needs " << (n)    \
                   << " CUDA devices, found " << cuda_device_count();                \
  } while (0)

struct Ranks {
  std::vector<std::unique_ptr<CudaBackend>> owned;  // rank r on device r
  std::vector<Backend*> backends;
  std::unique_ptr<TpGroup> group;
};
Ranks make_ranks(int n) {
  Ranks r;
  std::vector<CudaBackend*> gpus;
  for (int d = 0; d < n; ++d) {
    r.owned.push_back(make_cuda_backend(d));
    gpus.push_back(r.owned.back().get());
    r.backends.push_back(r.owned.back().get());
  }
  r.owned[0]->make_current();
  auto group = make_nccl_tp_group(gpus);
  EXPECT_TRUE(group.ok()) << group.message();
  if (group.ok()) r.group = std::move(group).value();
  return r;
}

// Runs fn(rank) on one thread per rank, each made current on its device first.
template <typename Fn>
void on_every_rank(Ranks& r, Fn fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < r.backends.size(); ++i) {
    threads.emplace_back([&, i] {
      r.backends[i]->make_current();
      fn(static_cast<int>(i));
    });
  }
  for (std::thread& t : threads) t.join();
  r.backends[0]->make_current();
}

// Rank r's values: element i is (i % 7) + r / 4 (exact in bf16), so the sum over n ranks is
// n (i % 7) + n (n - 1) / 8.
std::vector<float> rank_values(int rank, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = float(i % 7) + rank / 4.0f;
  return v;
}
float expected_sum(int n, int64_t i) {
  return float(n) * float(i % 7) + float(n * (n - 1)) / 8.0f;
}

void upload_values(Backend& b, const Tensor& t, const std::vector<float>& v) {
  if (t.dtype == DType::F32) {
    b.upload(t.data, v.data(), v.size() * 4);
    return;
  }
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  b.upload(t.data, h.data(), h.size() * 2);
}
std::vector<float> download_values(Backend& b, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32) {
    b.download(v.data(), t.data, v.size() * 4);
    return v;
  }
  std::vector<uint16_t> h(v.size());
  b.download(h.data(), t.data, h.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(h[i]);
  return v;
}

// Over every visible GPU: one rank (an all-reduce of one, a copy in place) is a valid group.
TEST(NcclTpGroup, AllReduceSumsEveryRanksTensorInPlace) {
  SYV_SKIP_WITHOUT_RANKS(1);
  const int n = cuda_device_count();
  Ranks r = make_ranks(n);
  ASSERT_TRUE(r.group);
  EXPECT_EQ(r.group->size(), n);
  EXPECT_NE(r.group->describe().find("NCCL"), std::string::npos) << r.group->describe();
  for (DType dtype : {DType::F32, DType::BF16}) {
    const int64_t count = 3 * 4096 + 5;  // not a multiple of anything NCCL likes
    std::vector<DeviceBuffer> bufs;
    for (Backend* b : r.backends) bufs.push_back(b->allocate(count * dtype_size(dtype)));
    std::vector<std::vector<float>> got(static_cast<size_t>(n));
    on_every_rank(r, [&](int rank) {
      Backend& b = *r.backends[rank];
      Tensor t = bufs[rank].view(dtype, {count});
      upload_values(b, t, rank_values(rank, count));
      r.group->comm(rank).all_reduce_sum(b, t);
      got[rank] = download_values(b, t);
    });
    for (int rank = 0; rank < n; ++rank) {
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(got[rank][static_cast<size_t>(i)], expected_sum(n, i))
            << dtype_name(dtype) << " rank " << rank << " element " << i;
      }
    }
  }
}

TEST(NcclTpGroup, AllReduceIsCapturedInACudaGraphOnEveryRank) {
  SYV_SKIP_WITHOUT_RANKS(1);
  const int n = cuda_device_count();
  Ranks r = make_ranks(n);
  ASSERT_TRUE(r.group);
  const int64_t count = 1000;
  std::vector<DeviceBuffer> bufs;
  for (Backend* b : r.backends) bufs.push_back(b->allocate(count * 4));
  std::vector<int> graphs(static_cast<size_t>(n), -1);
  // Every rank captures its all-reduce at the same time (capture_graph runs it once eagerly
  // first, so the ranks meet there too).
  on_every_rank(r, [&](int rank) {
    Backend& b = *r.backends[rank];
    Tensor t = bufs[rank].view(DType::F32, {count});
    graphs[rank] = b.capture_graph([&] { r.group->comm(rank).all_reduce_sum(b, t); });
  });
  std::vector<std::vector<float>> got(static_cast<size_t>(n));
  on_every_rank(r, [&](int rank) {
    Backend& b = *r.backends[rank];
    Tensor t = bufs[rank].view(DType::F32, {count});
    upload_values(b, t, rank_values(rank, count));
    b.replay_graph(graphs[rank]);
    got[rank] = download_values(b, t);
    b.destroy_graph(graphs[rank]);
  });
  for (int rank = 0; rank < n; ++rank)
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(got[rank][static_cast<size_t>(i)], expected_sum(n, i)) << "rank " << rank;
}

// Greedy tokens of a split model in bf16 cannot be held to bit equality with one GPU's: the
// row-parallel linears sum in another order (partial sums rounded to bf16, then NCCL's bf16
// sum), so a near-tie may flip. A request's tokens must equal up to its first difference, and
// there one GPU's token must have been a near-tie (its probability below kTieProb) that the
// split model scored alike (logprobs within kLogprobTol); the rest of that request is not
// compared. At most a quarter of the requests may diverge at all.
constexpr double kTieProb = 0.6;
constexpr double kLogprobTol = 0.2;

// A model folder split over n ranks (GPUs 0..n-1) through an NCCL group.
struct Split {
  Ranks ranks;  // outlives the model
  std::unique_ptr<Model> model;
};
Split load_split(const std::string& path, int n) {
  Split s;
  s.ranks = make_ranks(n);
  if (!s.ranks.group) return s;
  auto prepared = prepare_model(path, *s.ranks.backends[0]);
  EXPECT_TRUE(prepared.ok()) << prepared.message();
  if (!prepared.ok()) return s;
  auto model =
      load_tensor_parallel(*prepared, s.ranks.backends, LoadOptions{}, std::move(s.ranks.group));
  EXPECT_TRUE(model.ok()) << model.message();
  if (model.ok()) s.model = std::move(model).value();
  return s;
}

// split_requests() through the engine on `model`.
std::vector<RequestOutput> run_split_requests(Model& model, const EngineOptions& o,
                                              EngineStats* stats) {
  return run_requests(model, o, split_requests(static_cast<int32_t>(model.config().vocab_size)),
                      stats);
}

// The same on the model of `path` whole on GPU 0 (its own backend, gone when this returns).
std::vector<RequestOutput> run_one_gpu(const std::string& path, const EngineOptions& o,
                                       EngineStats* stats) {
  std::unique_ptr<CudaBackend> one = make_cuda_backend(0);
  auto model = load_model(path, *one);
  EXPECT_TRUE(model.ok()) << model.message();
  if (!model.ok()) return {};
  return run_split_requests(**model, o, stats);
}

// `graphs`: EngineOptions::cuda_graphs of both runs.
void expect_split_equals_one(const std::string& dir, int n, const char* graphs) {
  SCOPED_TRACE(dir + " over " + std::to_string(n) + " GPUs, graphs " + graphs);
  const std::string path = source_dir() + "/" + dir;
  EngineOptions o = scenario_options(16, 128, 4096, 24, true, 2);
  o.cuda_graphs = graphs;
  const std::vector<RequestOutput> want = run_one_gpu(path, o, nullptr);
  Split split = load_split(path, n);
  ASSERT_TRUE(split.model);
  EngineStats stats;
  const std::vector<RequestOutput> got = run_split_requests(*split.model, o, &stats);
  if (o.cuda_graphs != "off") EXPECT_GT(stats.graph_steps, 0u) << "no step replayed the graphs";
  ASSERT_EQ(got.size(), want.size());
  int diverged = 0;
  double worst_prompt = 0, sum_sq = 0, ref_sq = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const SampleOutput& g = got[i].samples.at(0);
    const SampleOutput& w = want[i].samples.at(0);
    ASSERT_EQ(g.tokens.size(), w.tokens.size()) << "request " << i;
    for (size_t t = 0; t < w.tokens.size(); ++t) {
      ASSERT_LT(t, g.logprobs.size());
      ASSERT_LT(t, w.logprobs.size());
      if (g.tokens[t] == w.tokens[t]) {
        EXPECT_NEAR(g.logprobs[t], w.logprobs[t], kLogprobTol) << "request " << i << " at " << t;
        continue;
      }
      ++diverged;
      EXPECT_LT(std::exp(w.logprobs[t]), kTieProb)
          << "request " << i << " token " << t << ": " << g.tokens[t] << " vs one GPU's "
          << w.tokens[t] << ", which was no near-tie (logprob " << w.logprobs[t] << ")";
      EXPECT_NEAR(g.logprobs[t], w.logprobs[t], kLogprobTol) << "request " << i << " at " << t;
      break;
    }
    ASSERT_EQ(g.prompt_logprobs.size(), w.prompt_logprobs.size()) << "request " << i;
    for (size_t t = 0; t < g.prompt_logprobs.size(); ++t) {
      const double a = g.prompt_logprobs[t].token.logprob, b = w.prompt_logprobs[t].token.logprob;
      worst_prompt = std::max(worst_prompt, std::abs(a - b));
      sum_sq += (a - b) * (a - b);
      ref_sq += b * b;
    }
  }
  const double rel_l2 = std::sqrt(sum_sq / std::max(ref_sq, 1e-30));
  std::printf(
      "%s over %d GPUs, graphs %s: prompt logprobs worst |diff| %.4f, relative L2 %.2e; %d of "
      "%zu requests diverged at a near-tie\n",
      dir.c_str(), n, graphs, worst_prompt, rel_l2, diverged, got.size());
  EXPECT_LT(rel_l2, 3e-2);  // a wrong shard gives ~1
  EXPECT_LT(worst_prompt, 0.3);
  EXPECT_LE(diverged * 4, static_cast<int>(got.size()));
}

TEST(TensorParallelGpu, SplitModelsEqualOneGpu) {
  SYV_SKIP_WITHOUT_RANKS(2);
  // tiny-dense: 4 query / 2 KV heads (over 4 ranks each KV head on two); tiny-hybrid: 2 query
  // heads, 4 GDN value heads; q35moe_top2_r2: every expert split by its intermediate size.
  // Graphs off, then on (every rank captures and replays its own).
  for (const char* graphs : {"off", "eager"}) {
    expect_split_equals_one("models/tiny-dense", 2, graphs);
    expect_split_equals_one("models/tiny-hybrid", 2, graphs);
    expect_split_equals_one("tests/fixtures/hybrid/q35moe_top2_r2", 2, graphs);
    if (cuda_device_count() >= 4) {
      expect_split_equals_one("models/tiny-dense", 4, graphs);
      expect_split_equals_one("tests/fixtures/hybrid/q35moe_top2_r2", 4, graphs);
    }
  }
}

// One rank through the NCCL group (ncclCommInitAll over one device: each all-reduce a copy in
// place) with CUDA graphs on, against the plain model on the same GPU with graphs on: the rank's
// weights are copies of the whole model's bits, its config is the whole one, and both run the
// same kernels on the same shapes (the same padded graph steps), so tokens and every logprob must
// be bit-equal, and the engine's graph counters equal. What one GPU can check of the ranks' graphs:
// capture_forward() on the rank threads, the model's graph table, staging, replays and destroys
// through it, NCCL's all-reduce inside the captured step.
TEST(TensorParallelGpu, OneRankThroughNcclWithGraphsEqualsOneGpu) {
  SYV_SKIP_WITHOUT_RANKS(1);
  for (const char* dir :
       {"models/tiny-dense", "models/tiny-hybrid", "tests/fixtures/hybrid/q35moe_top2_r2"}) {
    for (const char* graphs : {"eager", "lazy"}) {
      SCOPED_TRACE(std::string(dir) + ", graphs " + graphs);
      const std::string path = source_dir() + "/" + dir;
      // Up to 5 sequences at once: buckets 1, 2, 4, 5 (3 decoding sequences pad to 4).
      EngineOptions o = scenario_options(16, 128, 4096, 24, true, 5);
      o.cuda_graphs = graphs;
      EngineStats one_stats, split_stats;
      const std::vector<RequestOutput> want = run_one_gpu(path, o, &one_stats);
      Split split = load_split(path, 1);
      ASSERT_TRUE(split.model);
      EXPECT_TRUE(split.model->supports_graphs());
      const std::vector<RequestOutput> got = run_split_requests(*split.model, o, &split_stats);
      EXPECT_GT(split_stats.graph_steps, 0u) << "no step replayed the rank's graph";
      EXPECT_EQ(split_stats.graph_steps, one_stats.graph_steps);
      EXPECT_EQ(split_stats.graph_padding_rows, one_stats.graph_padding_rows);
      EXPECT_EQ(split_stats.graphs_captured, one_stats.graphs_captured);
      EXPECT_EQ(split_stats.steps, one_stats.steps);
      expect_same_outputs(got, want);
    }
  }
}

TEST(TensorParallelGpu, RanksNeedDevicesOfTheirOwn) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL (SYV_HAVE_NCCL)";
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  auto group = make_nccl_tp_group({gpu.get(), gpu.get()});
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.message(), "NCCL group: device 0 twice (one rank per GPU)");
}

}  // namespace
}  // namespace syv::testing
