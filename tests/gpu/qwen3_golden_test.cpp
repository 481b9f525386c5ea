// Qwen3 on the CUDA backend vs Hugging Face transformers (tests/fixtures/qwen3/*): the logits of
// every position within 2e-2 relative L2 (bf16 activations and weights against an fp32
// reference), and the same 12 greedy tokens, chosen on the GPU (argmax) so only ids cross to the
// host. Skipped cleanly when no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"

namespace syv {
namespace {

constexpr double kMaxRelL2 = 2e-2;
constexpr int32_t kPageSize = 16;

struct Fixture {
  std::string dir;
  std::vector<int32_t> tokens, greedy;
  int64_t vocab = 0;
  std::vector<float> logits;  // [T, vocab]
};

Fixture read_fixture(const std::string& name) {
  Fixture f;
  // SYV_SOURCE_DIR in the environment wins: a build carried to another machine finds the fixtures
  // in that machine's checkout.
  const char* root = std::getenv("SYV_SOURCE_DIR");
  f.dir = std::string(root ? root : SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/" + name;
  std::ifstream in(f.dir + "/expected.json");
  EXPECT_TRUE(in.good()) << f.dir;
  nlohmann::json j = nlohmann::json::parse(in);
  f.tokens = j["tokens"].get<std::vector<int32_t>>();
  f.greedy = j["greedy_tokens"].get<std::vector<int32_t>>();
  f.vocab = j["vocab_size"].get<int64_t>();
  f.logits.resize(f.tokens.size() * static_cast<size_t>(f.vocab));
  std::ifstream bin(f.dir + "/logits.bin", std::ios::binary);
  bin.read(reinterpret_cast<char*>(f.logits.data()),
           static_cast<std::streamsize>(f.logits.size() * 4));
  EXPECT_EQ(bin.gcount(), static_cast<std::streamsize>(f.logits.size() * 4));
  return f;
}

double rel_l2(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

Batch one_seq(const std::vector<int32_t>& tokens, int32_t begin, int32_t end,
              const std::vector<int32_t>& pages, bool all_logits) {
  Batch b;
  b.max_pages_per_seq = static_cast<int32_t>(pages.size());
  b.seq_starts = {0, end - begin};
  for (int32_t i = begin; i < end; ++i) {
    if (all_logits) b.logit_rows.push_back(i - begin);
    b.token_ids.push_back(tokens[i]);
    b.positions.push_back(i);
  }
  if (!all_logits) b.logit_rows.push_back(end - begin - 1);
  b.context_lens = {end};
  b.page_table = pages;
  return b;
}

class Qwen3GpuGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    fx_ = read_fixture(GetParam());
    gpu_ = make_cuda_backend(0);
    auto loaded = load_model(fx_.dir, *gpu_);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    model_ = std::move(loaded.value());
    CacheConfig cache;
    cache.page_size = kPageSize;
    cache.num_pages = 32;
    auto store = make_cache_store(*model_, cache);
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::move(store.value());
  }
  std::vector<float> down(const Tensor& t) {
    std::vector<float> h(static_cast<size_t>(t.numel()));
    gpu_->download(h.data(), t.data, h.size() * 4);
    return h;
  }
  Fixture fx_;
  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<CacheStore> store_;  // bound to model_
};

TEST_P(Qwen3GpuGolden, PrefillChunksAndDecodeMatchTransformers) {
  const int32_t T = static_cast<int32_t>(fx_.tokens.size());
  const std::vector<int32_t> pages = {3, 0, 7, 9};
  double worst = 0;
  auto check = [&](const std::vector<float>& got, int64_t row, int32_t pos, const char* what) {
    const double e =
        rel_l2(got.data() + row * fx_.vocab, fx_.logits.data() + pos * fx_.vocab, fx_.vocab);
    worst = std::max(worst, e);
    EXPECT_LE(e, kMaxRelL2) << what << " position " << pos;
  };
  std::vector<float> got = down(model_->forward(one_seq(fx_.tokens, 0, T, pages, true)));
  for (int32_t t = 0; t < T; ++t) check(got, t, t, "packed prefill");
  // Chunked: [0, 17), [17, 23), then token by token (the decode kernel).
  got = down(model_->forward(one_seq(fx_.tokens, 0, 17, pages, true)));
  for (int32_t t = 0; t < 17; ++t) check(got, t, t, "chunk 1");
  got = down(model_->forward(one_seq(fx_.tokens, 17, 23, pages, true)));
  for (int32_t t = 17; t < 23; ++t) check(got, t - 17, t, "chunk 2");
  for (int32_t t = 23; t < T; ++t) {
    got = down(model_->forward(one_seq(fx_.tokens, t, t + 1, pages, true)));
    check(got, 0, t, "decode");
  }
  std::printf("%s: worst per-row relative L2 %.3g (bound %.0e)\n", GetParam().c_str(), worst,
              kMaxRelL2);
}

TEST_P(Qwen3GpuGolden, GreedyTokensMatchTransformers) {
  std::vector<int32_t> seq = fx_.tokens;
  const std::vector<int32_t> pages = {0, 1, 2, 3};
  DeviceBuffer id_buf = gpu_->allocate(4);
  Tensor id = id_buf.view(DType::I32, {1});
  std::vector<int32_t> generated;
  int32_t begin = 0;
  for (size_t i = 0; i < fx_.greedy.size(); ++i) {
    const int32_t n = static_cast<int32_t>(seq.size());
    Tensor logits = model_->forward(one_seq(seq, begin, n, pages, false));
    gpu_->argmax(logits, id);
    int32_t next = -1;
    gpu_->download(&next, id.data, 4);
    generated.push_back(next);
    seq.push_back(next);
    begin = n;
  }
  EXPECT_EQ(generated, fx_.greedy);
}

// A decode step captured as a CUDA graph gives bit-identical logits when replayed, and a replay
// after prepare_batch() of the next step's batch (same shape) equals that step run eagerly.
TEST_P(Qwen3GpuGolden, GraphReplayMatchesEager) {
  const std::vector<int32_t>& seq = fx_.tokens;
  const int32_t T = static_cast<int32_t>(seq.size());
  const std::vector<int32_t> pages = {5, 2, 8, 1};
  const ModelConfig& c = model_->config();
  gpu_->reserve_attention_scratch(1, c.num_attention_heads, c.head_dim, 64);  // fixed splits
  down(model_->forward(one_seq(seq, 0, T - 2, pages, false)));
  const Batch b1 = one_seq(seq, T - 2, T - 1, pages, false);
  const std::vector<float> e1 = down(model_->forward(b1));
  Tensor logits;
  const int graph = gpu_->capture_graph([&] { logits = model_->forward(b1); });
  gpu_->replay_graph(graph);
  EXPECT_EQ(down(logits), e1) << "replay of the captured step";
  const Batch b2 = one_seq(seq, T - 1, T, pages, false);
  gpu_->prepare_batch(b2, kPageSize);
  gpu_->replay_graph(graph);
  const std::vector<float> g2 = down(logits);
  const std::vector<float> e2 = down(model_->forward(b2));
  EXPECT_EQ(g2, e2) << "replay on the next step's metadata";
  EXPECT_LE(rel_l2(e2.data(), fx_.logits.data() + int64_t{T - 1} * fx_.vocab, fx_.vocab),
            kMaxRelL2);
}

// --host-embeddings (LoadOptions::host_embeddings): the embedding table in mapped host memory
// leaves the device (allocated_bytes() drops by its bf16 bytes) and the model's logits are bit for
// bit those of the table on the device, eagerly and replayed from a CUDA graph.
TEST(Qwen3GpuHostEmbeddings, LogitsEqualTheDeviceTable) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Fixture fx = read_fixture("untied_gqa4_hd24");
  const std::vector<int32_t>& seq = fx.tokens;
  const int32_t T = static_cast<int32_t>(seq.size());
  const std::vector<int32_t> pages = {5, 2, 8, 1};
  struct Run {
    std::vector<float> prefill, decode, replay;
    size_t allocated = 0;
  };
  auto run = [&](bool host) {
    Run r;
    std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
    LoadOptions options;
    options.host_embeddings = host;
    auto loaded = load_model(fx.dir, *gpu, options);
    EXPECT_TRUE(loaded.ok()) << loaded.message();
    if (!loaded.ok()) return r;
    std::unique_ptr<Model> model = std::move(loaded.value());
    r.allocated = gpu->allocated_bytes();
    CacheConfig cache;
    cache.page_size = kPageSize;
    cache.num_pages = 32;
    auto store = make_cache_store(*model, cache);
    EXPECT_TRUE(store.ok()) << store.message();
    const ModelConfig& c = model->config();
    gpu->reserve_attention_scratch(1, c.num_attention_heads, c.head_dim, 64);
    auto down = [&](const Tensor& t) {
      std::vector<float> h(static_cast<size_t>(t.numel()));
      gpu->download(h.data(), t.data, h.size() * 4);
      return h;
    };
    r.prefill = down(model->forward(one_seq(seq, 0, T - 1, pages, true)));
    const Batch step = one_seq(seq, T - 1, T, pages, false);
    r.decode = down(model->forward(step));
    Tensor logits;
    const int graph = gpu->capture_graph([&] { logits = model->forward(step); });
    gpu->replay_graph(graph);
    r.replay = down(logits);
    return r;
  };
  const Run device = run(false), host = run(true);
  ASSERT_FALSE(device.prefill.empty());
  ASSERT_FALSE(host.prefill.empty());
  EXPECT_EQ(device.allocated - host.allocated, static_cast<size_t>(fx.vocab) * 64 * 2)
      << "vocab x hidden 64 bf16 table off the device";
  EXPECT_EQ(host.prefill, device.prefill);
  EXPECT_EQ(host.decode, device.decode);
  EXPECT_EQ(host.replay, host.decode);
  EXPECT_LE(rel_l2(host.decode.data(), fx.logits.data() + int64_t{T - 1} * fx.vocab, fx.vocab),
            kMaxRelL2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen3GpuGolden,
                         ::testing::Values("tied_gqa2", "tied_gqa4_kv1_hd64", "untied_gqa4_hd24",
                                           "untied_mha_hd32"));

}  // namespace
}  // namespace syv
