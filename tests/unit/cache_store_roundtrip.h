// The CacheStore contract (kv/cache_store.h) as a differential test, shared by the CPU test
// (unit/cache_store_test.cpp, for every KV dtype) and the CUDA one (gpu/cache_store_gpu_test.cpp):
// a sequence is prefilled, its pages / state slot / checkpoint go out to another buffer (host
// memory, or this backend's memory), the store's copies are overwritten with garbage, the bytes
// come back in, and the next decode step's logits must be bit-identical to a run that never left
// the store. A run that skips the copy back must differ (the garbage reaches the logits, so the
// test can fail).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv/cache_store.h"
#include "model/model.h"

namespace syv::testing {

constexpr int32_t kRtPage = 16;
constexpr int32_t kRtPrefill = 40;  // 3 pages: two full, one partial
constexpr int32_t kRtPagesPerSeq = 4;

// kv_dtype: CacheConfig::kv_dtype (nullopt: the model's declared KV).
inline CacheConfig roundtrip_cache_config(std::optional<DType> kv_dtype = std::nullopt) {
  CacheConfig c;
  c.kv_dtype = kv_dtype;
  c.page_size = kRtPage;
  c.num_pages = 8;
  c.num_state_slots = 2;
  c.num_checkpoints = 2;
  return c;
}

// Tokens [first, first + count) of a fixed sequence on pages `pages`, in state slot `slot`, with
// the last token's logits.
inline Batch roundtrip_batch(int32_t first, int32_t count, const std::vector<int32_t>& pages,
                             int32_t slot, bool recurrent) {
  Batch b;
  for (int32_t i = first; i < first + count; ++i) {
    b.token_ids.push_back((i * 37 + 11) % 200);
    b.positions.push_back(i);
  }
  b.seq_starts = {0, count};
  b.context_lens = {first + count};
  b.page_table = pages;
  b.page_table.resize(kRtPagesPerSeq, -1);
  b.max_pages_per_seq = kRtPagesPerSeq;
  if (recurrent) b.state_slots = {slot};
  b.logit_rows = {count - 1};
  return b;
}

inline std::vector<float> roundtrip_logits(Model& model, const Batch& batch) {
  Tensor t = model.forward(batch);
  std::vector<float> host(static_cast<size_t>(t.numel()));
  model.backend().download(host.data(), t.data, host.size() * sizeof(float));
  return host;
}

// What happens to the sequence's cache between its prefill and its next decode step.
enum class Detour {
  kNone,               // the reference
  kPagesViaHost,       // pages out to host memory, garbage in, back in
  kPagesViaDevice,     // ... through a buffer in the backend's memory
  kPagesLost,          // pages out, garbage in, NOT back (must differ)
  kPagesMoved,         // copy_page to other pages, garbage over the old ones, decode on the new
  kSlotViaHost,        // state slot out, zeroed, back in
  kSlotLost,           // state slot out, zeroed, NOT back (must differ)
  kSlotMoved,          // copy_slot to the other slot, decode there
  kCheckpointViaHost,  // save_checkpoint, checkpoint out, garbage in, back, load_checkpoint
};

// Runs prefill -> detour -> one decode token on a fresh store; returns the decode's logits.
inline std::vector<float> run_with_detour(Model& model, Detour detour,
                                          std::optional<DType> kv_dtype = std::nullopt) {
  Backend& backend = model.backend();
  const bool recurrent = model.cache_spec().has_recurrent_state();
  auto made = make_cache_store(model, roundtrip_cache_config(kv_dtype));
  EXPECT_TRUE(made.ok()) << made.message();
  std::unique_ptr<CacheStore> store = std::move(made.value());
  const std::vector<int32_t> pages = {0, 1, 2}, moved = {5, 6, 7};
  roundtrip_logits(model, roundtrip_batch(0, kRtPrefill, pages, 0, recurrent));

  const size_t page_bytes = static_cast<size_t>(store->page_bytes());
  const size_t slot_bytes = static_cast<size_t>(store->slot_bytes());
  std::vector<char> garbage(std::max(page_bytes, slot_bytes), 0x3f);  // finite in f32 and bf16
  std::vector<int32_t> decode_pages = pages;
  int32_t decode_slot = 0;
  switch (detour) {
    case Detour::kNone:
      break;
    case Detour::kPagesViaHost:
    case Detour::kPagesLost: {
      std::vector<std::vector<char>> saved(pages.size(), std::vector<char>(page_bytes));
      CopyEvent out;
      for (size_t i = 0; i < pages.size(); ++i)
        out = store->copy_page_out(pages[i], saved[i].data());
      backend.wait_copy(out);
      for (int32_t p : pages) backend.order_after_copy(store->copy_page_in(garbage.data(), p));
      if (detour == Detour::kPagesViaHost) {
        CopyEvent in;
        for (size_t i = 0; i < pages.size(); ++i)
          in = store->copy_page_in(saved[i].data(), pages[i]);
        backend.order_after_copy(in);
      }
      break;
    }
    case Detour::kPagesViaDevice: {
      DeviceBuffer saved = backend.allocate(page_bytes * pages.size());
      char* base = static_cast<char*>(saved.data());
      for (size_t i = 0; i < pages.size(); ++i)
        backend.wait_copy(store->copy_page_out(pages[i], base + i * page_bytes));
      for (int32_t p : pages) backend.wait_copy(store->copy_page_in(garbage.data(), p));
      CopyEvent in;
      for (size_t i = 0; i < pages.size(); ++i)
        in = store->copy_page_in(base + i * page_bytes, pages[i]);
      backend.order_after_copy(in);
      backend.synchronize();  // `saved` is freed at the end of this scope
      break;
    }
    case Detour::kPagesMoved:
      for (size_t i = 0; i < pages.size(); ++i) store->copy_page(pages[i], moved[i]);
      for (int32_t p : pages) backend.order_after_copy(store->copy_page_in(garbage.data(), p));
      decode_pages = moved;
      break;
    case Detour::kSlotViaHost:
    case Detour::kSlotLost: {
      std::vector<char> saved(slot_bytes);
      backend.wait_copy(store->copy_slot_out(0, saved.data()));
      store->reset_slot(0);
      if (detour == Detour::kSlotViaHost)
        backend.order_after_copy(store->copy_slot_in(saved.data(), 0));
      break;
    }
    case Detour::kSlotMoved:
      store->copy_slot(0, 1);
      store->reset_slot(0);
      decode_slot = 1;
      break;
    case Detour::kCheckpointViaHost: {
      std::vector<char> saved(slot_bytes);
      store->save_checkpoint(0, 1);
      backend.wait_copy(store->copy_checkpoint_out(1, saved.data()));
      backend.wait_copy(store->copy_checkpoint_in(garbage.data(), 1));
      store->reset_slot(0);
      backend.order_after_copy(store->copy_checkpoint_in(saved.data(), 1));
      store->load_checkpoint(1, 0);
      break;
    }
  }
  return roundtrip_logits(model,
                          roundtrip_batch(kRtPrefill, 1, decode_pages, decode_slot, recurrent));
}

inline bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every page detour of the contract; with recurrent state, the slot and checkpoint ones too. With
// a quantized kv_dtype the pages carry their scales (kv/cache_store.h's page layout).
inline void expect_round_trips_exact(Model& model, std::optional<DType> kv_dtype = std::nullopt) {
  auto run = [&](Detour d) { return run_with_detour(model, d, kv_dtype); };
  const std::vector<float> ref = run(Detour::kNone);
  ASSERT_FALSE(ref.empty());
  EXPECT_TRUE(bit_identical(ref, run(Detour::kNone))) << "not deterministic";
  EXPECT_TRUE(bit_identical(ref, run(Detour::kPagesViaHost))) << "via host";
  EXPECT_TRUE(bit_identical(ref, run(Detour::kPagesViaDevice))) << "via device";
  EXPECT_TRUE(bit_identical(ref, run(Detour::kPagesMoved))) << "copy_page";
  EXPECT_FALSE(bit_identical(ref, run(Detour::kPagesLost)))
      << "garbage pages did not change the logits: the test cannot see a failed copy";
  if (!model.cache_spec().has_recurrent_state()) return;
  EXPECT_TRUE(bit_identical(ref, run(Detour::kSlotViaHost))) << "slot";
  EXPECT_FALSE(bit_identical(ref, run(Detour::kSlotLost)))
      << "a zeroed state slot did not change the logits: the test cannot see a failed copy";
  EXPECT_TRUE(bit_identical(ref, run(Detour::kSlotMoved))) << "copy_slot";
  EXPECT_TRUE(bit_identical(ref, run(Detour::kCheckpointViaHost))) << "checkpoint";
}

}  // namespace syv::testing
