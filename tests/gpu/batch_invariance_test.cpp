// Batch-invariant mode on the CUDA backend (Backend::set_batch_invariant): every row of every op is
// bit-identical whatever else is in the batch. Differential tests, bit for bit:
//  * linear: for T in {1, 2, 3, 4, 5, 8, 17, 64, 127, 300, 1000, 2048}, row r of linear(x[0:T])
//    equals linear(x[r:r+1]), bf16 and f32 outputs, on the Qwen3-8B shapes (lm_head included),
//    the 0.6B shapes and the fixtures' odd ones (K % 16 != 0, N odd), for both invariant GEMMs
//    (the fixed cuBLASLt algorithms, the default, and gemm_invariant.cu, SYV_INVARIANT_GEMM=mma,
//    whose tile configurations all give the same bits); the result stays close to the default
//    mode's;
//  * attention: a token's output row is the same alone (one decode token), inside a long prefill
//    chunk, next to other sequences, and when the launch is split into token chunks (long
//    contexts); head_dim 32/64/128/256, GQA 1/2/4;
//  * a 2-layer model of real head shapes: the logits of every position are the same for one-shot
//    prefill, token-by-token decode, and chunked prefill packed with another sequence.
// The default mode is not batch-invariant; the model test prints how many rows differ there.
// PrintsCost times the GEMMs on the 8B shapes. Skipped when no CUDA device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"
#include "core/log.h"
#include "model/model.h"

namespace syv {
namespace {

// A backend created with `env` set (read at construction), in batch-invariant mode when asked.
std::unique_ptr<CudaBackend> backend_with(
    const std::vector<std::pair<std::string, std::string>>& env, bool invariant) {
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  std::unique_ptr<CudaBackend> b = make_cuda_backend(0);
  for (const auto& [k, v] : env) unsetenv(k.c_str());
  b->set_batch_invariant(invariant);
  return b;
}

double rel_l2(const float* got, const float* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<float> to_f32(const std::vector<uint8_t>& bytes, DType t) {
  std::vector<float> f(bytes.size() / dtype_size(t));
  convert_to_f32(t, bytes.data(), f.data(), f.size());
  return f;
}

// ---- linear ------------------------------------------------------------------------------------

struct Shape {
  const char* name;
  int64_t n, k;
  DType out;
};
const Shape kShapes[] = {
    {"8b q_proj", 4096, 4096, DType::BF16},      {"8b k_proj", 1024, 4096, DType::BF16},
    {"8b gate_up", 24576, 4096, DType::BF16},    {"8b down", 4096, 12288, DType::BF16},
    {"8b lm_head", 151936, 4096, DType::F32},    {"0.6b q_proj", 2048, 1024, DType::BF16},
    {"0.6b o_proj", 1024, 2048, DType::BF16},    {"0.6b gate_up", 6144, 1024, DType::BF16},
    {"0.6b down", 1024, 3072, DType::BF16},      {"hd64 gate_up", 224, 48, DType::BF16},
    {"hd64 lm_head", 640, 48, DType::F32},       {"hd32 down", 96, 160, DType::BF16},
    {"hd64 down", 48, 112, DType::BF16},         {"hd24 o_proj", 64, 192, DType::BF16},
    {"odd N, K % 16 = 8", 1001, 24, DType::F32}, {"hd32 lm_head", 768, 96, DType::F32},
};
const int64_t kTokens[] = {1, 2, 3, 4, 5, 8, 17, 64, 127, 300, 1000, 2048};
constexpr int64_t kMaxT = 2048, kMaxK = 12288;

class BatchInvariantLinear : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    base_ = make_cuda_backend(0);
    xbuf_ = base_->allocate(static_cast<size_t>(kMaxT * kMaxK) * 2);
    base_->fill_random(xbuf_.data(), DType::BF16, kMaxT * kMaxK, 11, 1.f);
    base_->synchronize();
  }

  struct Weights {
    DeviceBuffer buf;
    Tensor w;
  };
  Weights weights(const Shape& s) {
    Weights w;
    w.buf = base_->allocate(static_cast<size_t>(s.n * s.k) * 2);
    base_->fill_random(w.buf.data(), DType::BF16, s.n * s.k, 17 + s.n + s.k, 0.05f);
    base_->synchronize();
    w.w = Tensor(w.buf.data(), DType::BF16, {s.n, s.k});
    return w;
  }
  Tensor x_rows(int64_t r0, int64_t rows, int64_t k) const {
    return Tensor(static_cast<char*>(xbuf_.data()) + r0 * k * 2, DType::BF16, {rows, k});
  }
  // Runs linear(x[0:T]) on `gpu` into `out` (at least T * N elements) and downloads the bytes.
  std::vector<uint8_t> run(CudaBackend& gpu, const Shape& s, const Tensor& w, int64_t T,
                           DeviceBuffer& out) {
    Tensor o(out.data(), s.out, {T, s.n});
    gpu.fill_zero(out.data(), o.bytes());
    gpu.linear(x_rows(0, T, s.k), w, Tensor(), o);
    std::vector<uint8_t> host(o.bytes());
    gpu.download(host.data(), o.data, host.size());
    return host;
  }

  // Every row of every T equals the lone row, for the backend made with `env`.
  void check_rows_at_every_t(const std::vector<std::pair<std::string, std::string>>& env) {
    std::unique_ptr<CudaBackend> inv = backend_with(env, true);
    ASSERT_TRUE(inv->batch_invariant());
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(s.name);
      Weights w = weights(s);
      const size_t row_bytes = static_cast<size_t>(s.n) * dtype_size(s.out);
      DeviceBuffer refbuf = base_->allocate(row_bytes * kMaxT);
      // Reference: each row alone (T = 1).
      for (int64_t r = 0; r < kMaxT; ++r) {
        Tensor o(static_cast<char*>(refbuf.data()) + r * row_bytes, s.out, {1, s.n});
        inv->linear(x_rows(r, 1, s.k), w.w, Tensor(), o);
      }
      std::vector<uint8_t> ref(row_bytes * kMaxT);
      inv->download(ref.data(), refbuf.data(), ref.size());
      DeviceBuffer out = base_->allocate(row_bytes * kMaxT);
      for (int64_t T : kTokens) {
        const std::vector<uint8_t> got = run(*inv, s, w.w, T, out);
        int64_t bad = 0, first = -1;
        for (int64_t r = 0; r < T; ++r)
          if (std::memcmp(got.data() + r * row_bytes, ref.data() + r * row_bytes, row_bytes) != 0) {
            if (first < 0) first = r;
            ++bad;
          }
        EXPECT_EQ(bad, 0) << "T = " << T << ": " << bad << " rows differ from the row computed "
                          << "alone (first: row " << first << ")";
      }
      // Close to the default mode (cuBLASLt / GEMV) at 2048 and 1 tokens.
      for (int64_t T : {kMaxT, int64_t{1}}) {
        const std::vector<float> def = to_f32(run(*base_, s, w.w, T, out), s.out);
        const std::vector<float> mine =
            to_f32(std::vector<uint8_t>(ref.begin(), ref.begin() + row_bytes * T), s.out);
        double worst = 0;
        for (int64_t r = 0; r < T; ++r)
          worst = std::max(worst, rel_l2(mine.data() + r * s.n, def.data() + r * s.n, s.n));
        EXPECT_LT(worst, s.out == DType::F32 ? 1e-4 : 8e-3)
            << "T = " << T << ": worst per-row relative L2 against the default mode";
      }
    }
  }

  std::unique_ptr<CudaBackend> base_;  // default mode; owns the buffers
  DeviceBuffer xbuf_;                  // x [2048, 12288] bf16
};

TEST_F(BatchInvariantLinear, RowsAreBitIdenticalAtEveryTokenCount) {
  check_rows_at_every_t({});
}

TEST_F(BatchInvariantLinear, RowsAreBitIdenticalAtEveryTokenCountMma) {
  check_rows_at_every_t({{"SYV_INVARIANT_GEMM", "mma"}});
}

// gemm_invariant.cu: the tile only says who computes an element, never the order of its sum, so
// every tile configuration (small, medium, large) gives the auto dispatch's bits.
TEST_F(BatchInvariantLinear, EveryTileGivesTheSameBits) {
  std::unique_ptr<CudaBackend> autotile = backend_with({{"SYV_INVARIANT_GEMM", "mma"}}, true);
  std::unique_ptr<CudaBackend> pinned[3];
  for (int t = 0; t < 3; ++t)
    pinned[t] = backend_with(
        {{"SYV_INVARIANT_GEMM", "mma"}, {"SYV_INVARIANT_GEMM_TILE", std::to_string(t)}}, true);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.name);
    Weights w = weights(s);
    DeviceBuffer out = base_->allocate(static_cast<size_t>(s.n) * dtype_size(s.out) * 300);
    for (int64_t T : {int64_t{3}, int64_t{300}}) {
      const std::vector<uint8_t> want = run(*autotile, s, w.w, T, out);
      for (int t = 0; t < 3; ++t)
        EXPECT_TRUE(run(*pinned[t], s, w.w, T, out) == want) << "tile " << t << ", T = " << T;
    }
  }
}

TEST_F(BatchInvariantLinear, ModeSwitchesBackAndForth) {
  std::unique_ptr<CudaBackend> b = make_cuda_backend(0);
  EXPECT_FALSE(b->batch_invariant());
  b->set_batch_invariant(true);
  EXPECT_TRUE(b->batch_invariant());
  b->set_gemv_max_tokens(4);  // stays off while invariant (the GEMV is not)
  b->set_batch_invariant(false);
  EXPECT_FALSE(b->batch_invariant());
}

// Default vs invariant GEMM time per call on the 8B shapes (rotating weight copies, more than
// the L2 holds, as consecutive layers would read them).
TEST_F(BatchInvariantLinear, PrintsCost) {
  std::unique_ptr<CudaBackend> inv = backend_with({}, true);
  std::unique_ptr<CudaBackend> mma = backend_with({{"SYV_INVARIANT_GEMM", "mma"}}, true);
  for (int si : {0, 1, 2, 3, 4}) {
    const Shape& s = kShapes[si];
    const size_t wbytes = static_cast<size_t>(s.n * s.k) * 2;
    const int copies = static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / wbytes + 1));
    DeviceBuffer wb = base_->allocate(wbytes * copies);
    base_->fill_random(wb.data(), DType::BF16, static_cast<int64_t>(wbytes / 2) * copies, 5, 0.05f);
    DeviceBuffer ob = base_->allocate(static_cast<size_t>(kMaxT * s.n) * dtype_size(s.out));
    base_->synchronize();
    for (int64_t T : {int64_t{1}, int64_t{4}, int64_t{64}, kMaxT}) {
      Tensor x = x_rows(0, T, s.k), o(ob.data(), s.out, {T, s.n});
      double us[3];
      CudaBackend* which[3] = {base_.get(), inv.get(), mma.get()};
      for (int m = 0; m < 3; ++m) {
        int next = 0;
        auto step = [&] {
          for (int r = 0; r < 8; ++r) {
            Tensor w(static_cast<char*>(wb.data()) + wbytes * (next++ % copies), DType::BF16,
                     {s.n, s.k});
            which[m]->linear(x, w, Tensor(), o);
          }
        };
        std::vector<float> ms = which[m]->time_ms(step, 2, 10);
        std::sort(ms.begin(), ms.end());
        us[m] = ms[ms.size() / 2] * 1e3 / 8;
      }
      const double flop = 2.0 * double(T) * double(s.n) * double(s.k);
      std::printf(
          "| gemm cost | %-10s | T %5lld | default %9.2f us | invariant (fixed cuBLASLt) %9.2f us "
          "(x%.2f, %6.1f TFLOP/s, %6.0f GB/s of weights) | gemm_invariant.cu %9.2f us (x%.2f) |\n",
          s.name, static_cast<long long>(T), us[0], us[1], us[1] / us[0], flop / (us[1] * 1e6),
          double(wbytes) / (us[1] * 1e3), us[2], us[2] / us[0]);
    }
  }
}

// ---- attention ---------------------------------------------------------------------------------

struct AttnCase {
  int32_t head_dim, hq, hk, page_size;
  std::vector<int32_t> contexts;  // per sequence: its longest context in the test
};

// q row of (seq, position, head): a fixed pseudo-random bf16 vector.
void q_row(int32_t seq, int32_t pos, int32_t h, int32_t D, uint16_t* out) {
  std::mt19937 rng(static_cast<uint32_t>(seq * 7919 + pos * 131 + h * 31 + 1));
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int32_t i = 0; i < D; ++i) out[i] = f32_to_bf16(d(rng));
}

// A run of one sequence's new tokens: positions [first, last].
struct Chunk {
  int32_t seq, first, last;
};

TEST(BatchInvariantAttention, TokenRowsAreBitIdenticalAloneChunkedAndMixed) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = backend_with({}, true);
  const AttnCase cases[] = {
      {128, 32, 8, 64, {700, 300, 16384}},  // the 8B heads; 16K context: launches in chunks
      {64, 8, 2, 16, {700, 300}},          {256, 8, 4, 16, {700, 300}},
      {32, 4, 4, 16, {700, 300}},  // generic kernel
      {128, 16, 16, 16, {700, 300}},
  };
  for (const AttnCase& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", Hq " + std::to_string(c.hq) +
                 ", Hk " + std::to_string(c.hk));
    const int32_t S = static_cast<int32_t>(c.contexts.size()), D = c.head_dim;
    int32_t max_pages = 0;
    for (int32_t ctx : c.contexts)
      max_pages = std::max(max_pages, (ctx + c.page_size - 1) / c.page_size);
    const int64_t pages = int64_t{S} * max_pages;
    const int64_t cache_elems = pages * c.page_size * c.hk * D;
    DeviceBuffer kbuf = gpu->allocate(static_cast<size_t>(cache_elems) * 2);
    DeviceBuffer vbuf = gpu->allocate(static_cast<size_t>(cache_elems) * 2);
    gpu->fill_random(kbuf.data(), DType::BF16, cache_elems, 21, 1.f);
    gpu->fill_random(vbuf.data(), DType::BF16, cache_elems, 22, 1.f);
    Tensor kc(kbuf.data(), DType::BF16, {pages, c.page_size, c.hk, D});
    Tensor vc(vbuf.data(), DType::BF16, {pages, c.page_size, c.hk, D});
    const float scale = 1.f / std::sqrt(static_cast<float>(D));
    const int64_t row = int64_t{c.hq} * D;

    // Runs one batch of chunks; returns its output rows (bf16 bits), token by token.
    auto attend = [&](const std::vector<Chunk>& chunks) {
      Batch b;
      b.max_pages_per_seq = max_pages;
      b.seq_starts.push_back(0);
      std::vector<uint16_t> q;
      for (const Chunk& ch : chunks) {
        for (int32_t p = ch.first; p <= ch.last; ++p) {
          b.token_ids.push_back(0);
          b.positions.push_back(p);
          q.resize(q.size() + static_cast<size_t>(row));
          for (int32_t h = 0; h < c.hq; ++h)
            q_row(ch.seq, p, h, D, q.data() + q.size() - static_cast<size_t>(row) + h * D);
        }
        b.seq_starts.push_back(b.num_tokens());
        b.context_lens.push_back(ch.last + 1);
        for (int32_t j = 0; j < max_pages; ++j) b.page_table.push_back(ch.seq * max_pages + j);
      }
      b.logit_rows.push_back(b.num_tokens() - 1);
      const int64_t T = b.num_tokens();
      DeviceBuffer qb = gpu->allocate(q.size() * 2), ob = gpu->allocate(q.size() * 2);
      gpu->upload(qb.data(), q.data(), q.size() * 2);
      Tensor qt(qb.data(), DType::BF16, {T, c.hq, D}), ot(ob.data(), DType::BF16, {T, c.hq, D});
      BatchMeta meta = gpu->prepare_batch(b, c.page_size);
      gpu->paged_attention(qt, kc, vc, scale, meta, ot);
      std::vector<uint16_t> out(q.size());
      gpu->download(out.data(), ob.data(), out.size() * 2);
      return out;
    };
    // Mixed batches: a long prefill chunk with decode tokens and other chunks.
    std::vector<std::vector<Chunk>> batches = {
        {{0, 0, c.contexts[0] - 1}},  // a whole prompt
        {{0, 600, c.contexts[0] - 1}, {1, c.contexts[1] - 1, c.contexts[1] - 1}},
        {{1, 250, c.contexts[1] - 1}, {0, 17, 17}},
    };
    if (S > 2) {
      const int32_t ctx = c.contexts[2];
      batches.push_back({{2, ctx - 512, ctx - 1}, {1, 9, 9}, {0, 650, 699}});
      batches.push_back({{0, 699, 699}, {2, ctx - 1, ctx - 1}});
    }
    for (const auto& batch : batches) {
      const std::vector<uint16_t> got = attend(batch);
      size_t at = 0;
      int bad = 0;
      for (const Chunk& ch : batch) {
        for (int32_t p = ch.first; p <= ch.last; ++p, at += static_cast<size_t>(row)) {
          const std::vector<uint16_t> alone = attend({{ch.seq, p, p}});
          if (std::memcmp(alone.data(), got.data() + at, static_cast<size_t>(row) * 2) != 0 &&
              bad++ < 3)
            ADD_FAILURE() << "seq " << ch.seq << " position " << p << ": row differs from the "
                          << "token computed alone (batch of " << batch.size() << " chunks)";
        }
      }
      EXPECT_EQ(bad, 0) << "rows differing from the alone computation";
    }
  }
}

// ---- the model ---------------------------------------------------------------------------------

// A 2-layer Qwen3 with the 0.6B's heads (16 x 128, 8 KV heads), random weights, 4096-token vocab.
std::string write_small_model() {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("syv_batch_invariance_" + std::to_string(::getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16",
  "vocab_size": 4096, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 2,
  "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu",
  "rms_norm_eps": 1e-06, "rope_theta": 1000000, "max_position_embeddings": 40960,
  "tie_word_embeddings": false, "attention_bias": false, "bos_token_id": 1, "eos_token_id": 2
})";
  return dir;
}

TEST(BatchInvariantModel, LogitsOfEveryPositionAreBitIdenticalPrefillDecodeChunked) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  set_log_level(LogLevel::WARN);
  std::unique_ptr<CudaBackend> gpu = backend_with({}, false);
  const std::string dir = write_small_model();
  LoadOptions lo;
  lo.random_weights = true;
  lo.seed = 3;
  auto loaded = load_model(dir, *gpu, lo);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  Model& model = **loaded;
  constexpr int32_t kPage = 16, kMaxPages = 64;  // up to 1024 positions per sequence
  CacheConfig cc;
  cc.page_size = kPage;
  cc.num_pages = 8 * kMaxPages;
  auto store = make_cache_store(model, cc);
  ASSERT_TRUE(store.ok()) << store.message();
  const int64_t V = model.config().vocab_size;

  std::mt19937 rng(5);
  std::vector<int32_t> seq_a(333), seq_b(150);
  for (auto& t : seq_a) t = static_cast<int32_t>(rng() % V);
  for (auto& t : seq_b) t = static_cast<int32_t>(rng() % V);

  // One forward of chunks (sequence tokens, first position, count, page block); logits of every
  // new token, by (sequence index in `seqs`, position).
  struct Part {
    const std::vector<int32_t>* tokens;
    int32_t first, count, page_block;
  };
  auto forward = [&](const std::vector<Part>& parts) {
    Batch b;
    b.max_pages_per_seq = kMaxPages;
    b.seq_starts.push_back(0);
    for (const Part& p : parts) {
      for (int32_t i = 0; i < p.count; ++i) {
        b.logit_rows.push_back(b.num_tokens());
        b.token_ids.push_back((*p.tokens)[static_cast<size_t>(p.first + i)]);
        b.positions.push_back(p.first + i);
      }
      b.seq_starts.push_back(b.num_tokens());
      b.context_lens.push_back(p.first + p.count);
      for (int32_t j = 0; j < kMaxPages; ++j) b.page_table.push_back(p.page_block * kMaxPages + j);
    }
    Tensor logits = model.forward(b);
    std::vector<float> host(static_cast<size_t>(logits.numel()));
    gpu->download(host.data(), logits.data, host.size() * 4);
    return host;
  };
  // Logits of every position of a and b computed three ways, in page blocks of their own.
  auto three_ways = [&](std::vector<float>(&a)[3], std::vector<float>(&b)[3]) {
    const size_t la = seq_a.size(), lb = seq_b.size();
    for (auto& v : a) v.assign(la * static_cast<size_t>(V), NAN);
    for (auto& v : b) v.assign(lb * static_cast<size_t>(V), NAN);
    auto put = [&](std::vector<float>& dst, int32_t first, const float* src, int32_t count) {
      std::copy_n(src, static_cast<size_t>(count) * V, dst.data() + static_cast<size_t>(first) * V);
    };
    // 1. Each alone, one prefill of the whole sequence.
    std::vector<float> l = forward({{&seq_a, 0, static_cast<int32_t>(la), 0}});
    put(a[0], 0, l.data(), static_cast<int32_t>(la));
    l = forward({{&seq_b, 0, static_cast<int32_t>(lb), 1}});
    put(b[0], 0, l.data(), static_cast<int32_t>(lb));
    // 2. Each alone, token by token (decode steps).
    for (int32_t p = 0; p < static_cast<int32_t>(la); ++p)
      put(a[1], p, forward({{&seq_a, p, 1, 2}}).data(), 1);
    for (int32_t p = 0; p < static_cast<int32_t>(lb); ++p)
      put(b[1], p, forward({{&seq_b, p, 1, 3}}).data(), 1);
    // 3. Together: chunks of varying size (1, 7, 33, 100, ...) packed in the same forwards.
    const int32_t sizes_a[] = {1, 7, 33, 100, 2, 64, 17}, sizes_b[] = {5, 1, 1, 40, 33, 3};
    int32_t pa = 0, pb = 0;
    for (int step = 0; pa < static_cast<int32_t>(la) || pb < static_cast<int32_t>(lb); ++step) {
      std::vector<Part> parts;
      const int32_t na = std::min<int32_t>(sizes_a[step % 7], static_cast<int32_t>(la) - pa);
      const int32_t nb = std::min<int32_t>(sizes_b[step % 6], static_cast<int32_t>(lb) - pb);
      if (nb > 0) parts.push_back({&seq_b, pb, nb, 5});
      if (na > 0) parts.push_back({&seq_a, pa, na, 4});
      l = forward(parts);
      size_t at = 0;
      for (const Part& p : parts) {
        put(p.tokens == &seq_a ? a[2] : b[2], p.first, l.data() + at * V, p.count);
        at += static_cast<size_t>(p.count);
      }
      pa += na;
      pb += nb;
    }
  };
  auto differing_rows = [&](const std::vector<float>& x, const std::vector<float>& y) {
    int64_t n = 0;
    for (size_t r = 0; r < x.size() / static_cast<size_t>(V); ++r)
      n += std::memcmp(x.data() + r * V, y.data() + r * V, static_cast<size_t>(V) * 4) != 0;
    return n;
  };

  std::vector<float> a[3], b[3];
  three_ways(a, b);
  std::printf(
      "default mode: logits rows differing from the one-shot prefill's: sequence a: "
      "decode %lld, chunked + packed %lld of %zu; sequence b: %lld, %lld of %zu\n",
      static_cast<long long>(differing_rows(a[0], a[1])),
      static_cast<long long>(differing_rows(a[0], a[2])), seq_a.size(),
      static_cast<long long>(differing_rows(b[0], b[1])),
      static_cast<long long>(differing_rows(b[0], b[2])), seq_b.size());

  gpu->set_batch_invariant(true);
  three_ways(a, b);
  for (int way : {1, 2}) {
    EXPECT_EQ(differing_rows(a[0], a[way]), 0)
        << "sequence a: " << (way == 1 ? "decode" : "chunked + packed") << " vs one-shot prefill";
    EXPECT_EQ(differing_rows(b[0], b[way]), 0)
        << "sequence b: " << (way == 1 ? "decode" : "chunked + packed") << " vs one-shot prefill";
  }
  for (float v : a[0]) ASSERT_TRUE(std::isfinite(v)) << "logits not finite";
}

}  // namespace
}  // namespace syv
