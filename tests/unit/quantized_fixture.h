// `syv quantize` folders of the tiny Qwen3 fixtures, for the tests of quantized checkpoints through
// the engine: quantize_fixture() writes one (model/quantize_folder.h), and
// write_dequantized_folder() writes the float folder of its dequantized weights (f32, which the
// CPU backend keeps as they are), so that the quantized model and the float one compute on the
// same weight values.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "kv/cache_store.h"
#include "model/model.h"
#include "model/quant_weights.h"
#include "model/quantize_folder.h"

namespace syv::testing {

// tests/fixtures/<fixture> (e.g. "qwen3/tied_gqa2") quantized into `out` (replaced); fp8 with
// block x block scale tiles.
inline ::testing::AssertionResult quantize_fixture(const std::string& fixture,
                                                   QuantizeFormat format, int32_t group_size,
                                                   const std::filesystem::path& out,
                                                   int32_t block = 128) {
  std::filesystem::remove_all(out);
  QuantizeOptions o;
  o.in_dir = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/" + fixture;
  o.out_dir = out.string();
  o.format = format;
  o.group_size = group_size;
  o.block = block;
  Status s = quantize_folder(o);
  if (!s.ok()) return ::testing::AssertionFailure() << "syv quantize: " << s.message();
  return ::testing::AssertionSuccess();
}

// The float folder `out` of `quantized`'s weights: every tensor of the float folder `source` it
// was made from, the quantized ones replaced by their dequantized values; source's config.json.
inline ::testing::AssertionResult write_dequantized_folder(const std::filesystem::path& source,
                                                           const std::filesystem::path& quantized,
                                                           const std::filesystem::path& out) {
  auto config = load_model_config(quantized.string());
  auto qs = WeightStore::open_dir(quantized.string());
  auto fs = WeightStore::open_dir(source.string());
  if (!config.ok() || !qs.ok() || !fs.ok())
    return ::testing::AssertionFailure() << "cannot open " << quantized << " or " << source;
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  values.reserve(fs->names().size());
  for (const std::string& name : fs->names()) {
    const TensorInfo& t = *fs->find(name);
    if (stored_quantized(name, *qs, config->quant)) {
      auto q = read_quantized(name, t.shape, *qs, config->quant);
      if (!q.ok()) return ::testing::AssertionFailure() << q.message();
      values.push_back(q->dequantize());
    } else {
      values.emplace_back(static_cast<size_t>(t.numel()));
      convert_to_f32(t.dtype, t.data, values.back().data(), values.back().size());
    }
    tensors.push_back({name, DType::F32, t.shape, values.back().data()});
  }
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  Status s = write_safetensors((out / "model.safetensors").string(), tensors);
  if (!s.ok()) return ::testing::AssertionFailure() << s.message();
  std::filesystem::copy_file(source / "config.json", out / "config.json");
  return ::testing::AssertionSuccess();
}

// Logits of every position of `tokens`, run as one fresh sequence (its own two pages of 16
// positions and, for hybrids, one state slot) through `model` on `backend`, on the host.
inline std::vector<float> sequence_logits(Model& model, Backend& backend,
                                          const std::vector<int32_t>& tokens) {
  CacheConfig cache;
  cache.page_size = 16;
  cache.num_pages = 2;
  cache.num_state_slots = model.cache_spec().has_recurrent_state() ? 1 : 0;
  auto store = make_cache_store(model, cache);
  EXPECT_TRUE(store.ok()) << store.message();
  if (!store.ok()) return {};
  Batch b;
  const int32_t T = static_cast<int32_t>(tokens.size());
  b.token_ids = tokens;
  for (int32_t i = 0; i < T; ++i) b.positions.push_back(i), b.logit_rows.push_back(i);
  b.seq_starts = {0, T};
  b.context_lens = {T};
  b.page_table = {0, 1};
  b.max_pages_per_seq = 2;
  if (model.cache_spec().has_recurrent_state()) b.state_slots = {0};
  Tensor t = model.forward(b);
  std::vector<float> host(static_cast<size_t>(t.numel()));
  backend.download(host.data(), t.data, host.size() * sizeof(float));
  return host;
}

}  // namespace syv::testing
