// kv/cache_store: the engine-owned cache. Its contract (the header's), on the CPU backend: pages,
// state slots and checkpoints copied out to another buffer and back leave the next step's logits
// bit-identical (cache_store_roundtrip.h); layouts, sizes and refusals.
#include "kv/cache_store.h"
#include "unit/keep_dtype_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "model/model.h"
#include "model/registry.h"
#include "unit/cache_store_roundtrip.h"

namespace syv::testing {
namespace {

// (fixture, KV dtype): the store's copies carry a quantized page's scales with its values.
class CacheStoreRoundTrip
    : public ::testing::TestWithParam<std::tuple<std::string, std::optional<DType>>> {};

TEST_P(CacheStoreRoundTrip, CopiesOutAndBackAreBitExact) {
  set_log_level(LogLevel::WARN);
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  const auto& [fixture, kv_dtype] = GetParam();
  auto model = load_model(std::string(SYV_SOURCE_DIR) + "/tests/fixtures/" + fixture, *cpu);
  ASSERT_TRUE(model.ok()) << model.message();
  if (kv_dtype == DType::U4X2 && (*model)->config().head_dim % kKvInt4Group != 0) {
    auto refused = make_cache_store(**model, roundtrip_cache_config(kv_dtype));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("int4 needs head_dim % 32 == 0"), std::string::npos)
        << refused.message();
    return;
  }
  expect_round_trips_exact(**model, kv_dtype);
}

// Dense models (pages only) and hybrids with both attention pages and recurrent state; float, fp8
// and int4 KV.
INSTANTIATE_TEST_SUITE_P(
    Models, CacheStoreRoundTrip,
    ::testing::Combine(::testing::Values("qwen3/tied_gqa2", "qwen3/untied_mha_hd32",
                                         "hybrid/q35_r2_flfl_tied", "hybrid/qnext_top1_r2"),
                       ::testing::Values(std::optional<DType>(), std::optional(DType::F8E4M3),
                                         std::optional(DType::U4X2))),
    [](const auto& info) {
      std::string n = std::get<0>(info.param);
      for (char& ch : n) ch = ch == '/' ? '_' : ch;
      const std::optional<DType> kv = std::get<1>(info.param);
      return n + "_" + (kv ? std::string(dtype_name(*kv)) : std::string("declared"));
    });

CacheSpec two_kinds() {
  CacheSpec spec;
  spec.add_kv_layer({2, 8, DType::F32});
  spec.add_state_layer({3, 12, 2, 4, 4});
  spec.add_kv_layer({1, 4, DType::BF16});
  return spec;
}

// A config of `pages` pages of `page_size` tokens, `slots` state slots and `checkpoints`
// checkpoints.
CacheConfig config_of(int32_t page_size, int32_t pages, int32_t slots, int32_t checkpoints = 0) {
  CacheConfig c;
  c.page_size = page_size;
  c.num_pages = pages;
  c.num_state_slots = slots;
  c.num_checkpoints = checkpoints;
  return c;
}

TEST(CacheStore, SpecSumsBytesOnce) {
  const CacheSpec spec = two_kinds();
  EXPECT_EQ(spec.kv_bytes_per_token, 2 * 2 * 8 * 4 + 2 * 1 * 4 * 2);
  EXPECT_EQ(spec.state_bytes_per_seq, (3 * 12 + 2 * 4 * 4) * 4);
  ASSERT_EQ(spec.layer_kinds.size(), 3u);
  EXPECT_EQ(spec.layer_kinds[1], LayerCacheKind::kRecurrentState);
}

TEST(CacheStore, ViewsHaveTheDocumentedShapes) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  const CacheConfig c = config_of(16, 5, 3, 2);
  auto store = CacheStore::create(two_kinds(), c, *cpu);
  ASSERT_TRUE(store.ok()) << store.message();
  const CacheStore& s = **store;
  EXPECT_EQ(s.page_bytes(), s.spec().kv_bytes_per_token * 16);
  EXPECT_EQ(s.slot_bytes(), s.spec().state_bytes_per_seq);
  EXPECT_EQ(s.total_bytes(), 5 * s.page_bytes() + 5 * s.slot_bytes());
  const CacheStore::KvView kv = s.kv_view(2);
  EXPECT_EQ(kv.k.dtype, DType::BF16);
  EXPECT_EQ(kv.k.dim(0), 5);
  EXPECT_EQ(kv.k.dim(1), 16);
  EXPECT_EQ(kv.v.dim(2), 1);
  EXPECT_EQ(kv.v.dim(3), 4);
  const CacheStore::StateView st = s.state_view(1);
  EXPECT_EQ(st.conv.dim(0), 3);
  EXPECT_EQ(st.conv.dim(1), 3);
  EXPECT_EQ(st.conv.dim(2), 12);
  EXPECT_EQ(st.ssm.dim(1), 2);
  for (int64_t i = 0; i < st.ssm.numel(); ++i) ASSERT_EQ(st.ssm.as<float>()[i], 0.0f) << "zeroed";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(s.kv_view(1), "recurrent state, not KV pages");
  EXPECT_DEATH(s.state_view(0), "KV pages, not recurrent state");
  EXPECT_DEATH((*store)->copy_page(0, 5), "page 5 outside \\[0, 5\\)");
  EXPECT_DEATH((*store)->save_checkpoint(0, 2), "checkpoint 2 outside \\[0, 2\\)");
}

// copy_pages_out / copy_pages_in move several pages as one batch, each page to and from its own
// external buffer in the layout copy_page_out gives one page.
TEST(CacheStore, PagesCopiedAsOneBatchEqualPageByPage) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  auto made = CacheStore::create(two_kinds(), config_of(4, 6, 1), *cpu);
  ASSERT_TRUE(made.ok()) << made.message();
  CacheStore& store = **made;
  const size_t bytes = static_cast<size_t>(store.page_bytes());
  std::vector<std::vector<unsigned char>> in(6, std::vector<unsigned char>(bytes));
  for (size_t p = 0; p < 6; ++p)
    for (size_t i = 0; i < bytes; ++i) in[p][i] = static_cast<unsigned char>(7 * p + i * 13);
  // Pages 0..5 filled as one batch, listed out of order.
  std::vector<CacheStore::PageCopy> fill;
  for (int32_t p : {3, 0, 5, 1, 4, 2}) fill.push_back({p, in[static_cast<size_t>(p)].data()});
  cpu->wait_copy(store.copy_pages_in(fill));
  for (int32_t p = 0; p < 6; ++p) {
    std::vector<unsigned char> one(bytes);
    cpu->wait_copy(store.copy_page_out(p, one.data()));
    EXPECT_EQ(one, in[static_cast<size_t>(p)]) << "page " << p;
  }
  // Three of them out as one batch into buffers of their own.
  std::vector<std::vector<unsigned char>> out(3, std::vector<unsigned char>(bytes));
  const CacheStore::PageCopy three[] = {{4, out[0].data()}, {1, out[1].data()}, {2, out[2].data()}};
  cpu->wait_copy(store.copy_pages_out(three));
  EXPECT_EQ(out[0], in[4]);
  EXPECT_EQ(out[1], in[1]);
  EXPECT_EQ(out[2], in[2]);
  EXPECT_TRUE(store.copy_pages_out({}).empty());
}

// The CPU backend, recording every copy_batch_async batch.
class RecordingBackend final : public CpuBackend {
 public:
  std::vector<std::vector<CopyOp>> batches;
  CopyEvent copy_batch_async(const std::vector<CopyOp>& ops, CopyDir dir) override {
    batches.push_back(ops);
    return CpuBackend::copy_batch_async(ops, dir);
  }
};

// Attention layers of one shape put a page's K and V rows at one pitch, so the page moves as one
// strided copy of 2 x layers rows (quantized KV: one more for the scales), in the external layout
// the header gives: each layer's K then V, then the scales likewise. Layers of different shapes
// take a strided copy per run of equal rows.
TEST(CacheStore, APageOfUniformLayersIsOneStridedCopy) {
  for (const std::optional<DType> kv : {std::optional<DType>(), std::optional(DType::F8E4M3)}) {
    SCOPED_TRACE(kv ? dtype_name(*kv) : "f32");
    RecordingBackend cpu;
    CacheSpec spec;
    for (int i = 0; i < 3; ++i) spec.add_kv_layer({2, 8, DType::F32});
    spec.add_state_layer({3, 12, 2, 4, 4});
    CacheConfig c = config_of(4, 5, 1);
    c.kv_dtype = kv;
    auto made = CacheStore::create(spec, c, cpu);
    ASSERT_TRUE(made.ok()) << made.message();
    CacheStore& store = **made;
    // Distinct bytes in every page of every row (values and scales).
    for (int32_t layer : {0, 1, 2}) {
      const CacheStore::KvView v = store.kv_view(layer);
      for (const Tensor* t : {&v.k, &v.v, &v.k_scales, &v.v_scales}) {
        if (t->empty()) continue;
        auto* b = static_cast<unsigned char*>(t->data);
        for (size_t i = 0; i < t->bytes(); ++i) b[i] = static_cast<unsigned char>(i * 7 + layer);
      }
    }
    std::vector<unsigned char> page(static_cast<size_t>(store.page_bytes()));
    cpu.batches.clear();
    cpu.wait_copy(store.copy_page_out(2, page.data()));
    ASSERT_EQ(cpu.batches.size(), 1u);
    const std::vector<CopyOp>& ops = cpu.batches[0];
    ASSERT_EQ(ops.size(), kv ? 2u : 1u);
    EXPECT_EQ(ops[0].rows, 6u);
    if (kv) EXPECT_EQ(ops[1].rows, 6u);
    size_t expect_total = 0;
    for (const CopyOp& op : ops) expect_total += op.total_bytes();
    EXPECT_EQ(expect_total, page.size());
    // The external layout: K, V of each layer, then the scales.
    size_t at = 0;
    for (int part = 0; part < (kv ? 2 : 1); ++part) {
      for (int32_t layer : {0, 1, 2}) {
        const CacheStore::KvView v = store.kv_view(layer);
        for (const Tensor* t : part == 0 ? std::vector<const Tensor*>{&v.k, &v.v}
                                         : std::vector<const Tensor*>{&v.k_scales, &v.v_scales}) {
          const size_t per_page = t->bytes() / 5;
          EXPECT_EQ(
              std::memcmp(page.data() + at,
                          static_cast<const unsigned char*>(t->data) + 2 * per_page, per_page),
              0)
              << "layer " << layer << " at byte " << at;
          at += per_page;
        }
      }
    }
    EXPECT_EQ(at, page.size());
    // Back into another page: the same bytes there.
    std::vector<unsigned char> again(page.size());
    cpu.wait_copy(store.copy_page_in(page.data(), 4));
    cpu.wait_copy(store.copy_page_out(4, again.data()));
    EXPECT_EQ(again, page);
  }
  // Two shapes: one strided copy per run.
  RecordingBackend cpu;
  auto made = CacheStore::create(two_kinds(), config_of(4, 3, 1), cpu);
  ASSERT_TRUE(made.ok()) << made.message();
  std::vector<unsigned char> page(static_cast<size_t>((*made)->page_bytes()));
  cpu.wait_copy((*made)->copy_page_out(1, page.data()));
  ASSERT_EQ(cpu.batches.size(), 1u);
  ASSERT_EQ(cpu.batches[0].size(), 2u);
  EXPECT_EQ(cpu.batches[0][0].rows, 2u);
  EXPECT_EQ(cpu.batches[0][1].rows, 2u);
}

TEST(CacheStore, StateDtypeHalvesTheDeltaRuleState) {
  const CacheSpec bf16 = two_kinds().with_state_dtype(DType::BF16);
  EXPECT_EQ(bf16.layer_kinds, two_kinds().layer_kinds);
  EXPECT_EQ(bf16.kv_bytes_per_token, two_kinds().kv_bytes_per_token);
  EXPECT_EQ(bf16.state_bytes_per_seq, 3 * 12 * 4 + 2 * 4 * 4 * 2);  // conv stays f32
  EXPECT_EQ(bf16.with_state_dtype(DType::F32).state_bytes_per_seq, two_kinds().state_bytes_per_seq);

  // The CPU's delta rule keeps f32 state: bf16 is refused with what to do.
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  CacheConfig c = config_of(16, 4, 2, 1);
  c.state_dtype = DType::BF16;
  auto refused = CacheStore::create(two_kinds(), c, *cpu);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("recurrent state dtype bf16 is not supported on backend cpu"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("--state-dtype fp32"), std::string::npos);

  // A backend that takes bf16 state gets bf16 views, slots and checkpoints of the halved size.
  KeepDtypeBackend mem(DType::F32);
  mem.set_state_dtype(DType::BF16);
  auto store = CacheStore::create(two_kinds(), c, mem);
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ((*store)->slot_bytes(), bf16.state_bytes_per_seq);
  const CacheStore::StateView st = (*store)->state_view(1);
  EXPECT_EQ(st.ssm.dtype, DType::BF16);
  EXPECT_EQ(st.conv.dtype, DType::F32);
  EXPECT_EQ(st.ssm.bytes(), static_cast<size_t>(2 * 2 * 4 * 4 * 2));
  EXPECT_NE((*store)->describe().find("delta-rule state bf16"), std::string::npos)
      << (*store)->describe();
  // A model whose spec has no recurrent layer ignores the field.
  CacheSpec dense;
  dense.add_kv_layer({2, 8, DType::F32});
  EXPECT_TRUE(CacheStore::create(dense, c, *cpu).ok());
}

TEST(CacheStore, BadConfigsAreErrors) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  CacheConfig c = config_of(16, 0, 1);
  auto no_pages = CacheStore::create(two_kinds(), c, *cpu);
  ASSERT_FALSE(no_pages.ok());
  EXPECT_EQ(no_pages.message(),
            "cache config: page_size and num_pages must be positive, found 16 and 0");
  c.num_pages = 4;
  c.num_state_slots = 0;
  auto no_slots = CacheStore::create(two_kinds(), c, *cpu);
  ASSERT_FALSE(no_slots.ok());
  EXPECT_NE(no_slots.message().find("num_state_slots > 0"), std::string::npos);
}

TEST(ModelRegistry, ServesEveryModelTypeOnce) {
  for (const char* t : {"qwen3", "qwen3_5", "qwen3_5_text", "qwen3_next"}) {
    const ModelArch* a = find_model_arch(t);
    ASSERT_NE(a, nullptr) << t;
    EXPECT_NE(a->load, nullptr);
    EXPECT_NE(a->cache_spec, nullptr);
    EXPECT_NE(a->validate, nullptr);
  }
  EXPECT_EQ(find_model_arch("llama"), nullptr);
  EXPECT_FALSE(find_model_arch("qwen3")->needs_hybrid_ops);
  EXPECT_TRUE(find_model_arch("qwen3_next")->needs_hybrid_ops);
}

}  // namespace
}  // namespace syv::testing
