// The memory plan (backend/memory_plan.h) that sizes the KV pool on a GPU: what is left of
// total x utilization after weights, activations, the runtime reserve and, for hybrid models, the
// recurrent-state slots the engine allocates (engine_state_slots()).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backend/batch.h"
#include "backend/memory_plan.h"
#include "backend/moe_scratch.h"
#include "engine/engine_core.h"
#include "kv/cache_spec.h"

namespace syv {
namespace {

MemoryPlanInput input() {
  MemoryPlanInput in;
  in.total_bytes = size_t{100} << 30;
  in.utilization = 0.9;
  in.weight_bytes = size_t{16} << 30;
  in.activation_peak_bytes = size_t{2} << 30;
  in.other_bytes = size_t{1} << 30;
  in.kv_bytes_per_token = 32768;
  in.page_size = 64;
  in.max_position = 32768;
  return in;
}

TEST(MemoryPlan, PoolIsWhatTheBudgetLeaves) {
  auto plan = plan_memory(input());
  ASSERT_TRUE(plan.ok()) << plan.message();
  const size_t budget = static_cast<size_t>((size_t{100} << 30) * 0.9);
  const size_t left = budget - (size_t{19} << 30);
  EXPECT_EQ(plan->pages, static_cast<int64_t>(left / (32768 * 64)));
  EXPECT_EQ(plan->tokens, plan->pages * 64);
  EXPECT_EQ(plan->max_context, 32768);
  EXPECT_EQ(plan->state_slots, 0);
  EXPECT_EQ(plan->summary().find("recurrent"), std::string::npos) << plan->summary();
}

TEST(MemoryPlan, RecurrentStateIsReservedBeforeThePool) {
  MemoryPlanInput in = input();
  auto without = plan_memory(in);
  in.state_bytes_per_slot = 50 << 20;
  in.state_slots = 100;
  auto with = plan_memory(in);
  ASSERT_TRUE(with.ok()) << with.message();
  EXPECT_EQ(with->state_bytes, int64_t{100} * (50 << 20));
  // 5000 MiB of state is 2500 pages of 2 MiB fewer (to the page).
  EXPECT_NEAR(static_cast<double>(without->pages - with->pages), 2500.0, 1.0);
  EXPECT_NE(with->summary().find("recurrent state: 100 slots"), std::string::npos)
      << with->summary();
  in.state_slots = 2000;  // 100 GB of state: no room for a page
  auto none = plan_memory(in);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("recurrent state"), std::string::npos) << none.message();
}

TEST(MemoryPlan, EngineStateSlotsFollowTheEngineOptions) {
  CacheSpec dense;
  dense.add_kv_layer({8, 128, DType::BF16});
  EXPECT_EQ(engine_state_slots(dense, EngineOptions{}), 0);

  CacheSpec hybrid;
  hybrid.add_kv_layer({4, 256, DType::BF16});
  hybrid.add_state_layer({3, 8192, 32, 128, 128});  // ~2.1 MB
  EngineOptions o;
  o.max_num_seqs = 16;
  o.enable_prefix_caching = true;
  // 1 GiB of checkpoints is ~500 states, capped at 8 per running sequence: 128.
  EXPECT_EQ(engine_state_slots(hybrid, o), 16 + 128);
  o.num_checkpoints = 10;
  EXPECT_EQ(engine_state_slots(hybrid, o), 16 + 10);
  o.num_speculative_tokens = 3;  // k = 3 verify states per sequence
  EXPECT_EQ(engine_state_slots(hybrid, o), 16 + 3 * 16 + 10);
  o.enable_prefix_caching = false;  // no checkpoints at all
  EXPECT_EQ(engine_state_slots(hybrid, o), 16 + 3 * 16);

  // bf16 state (--state-dtype bf16): the same checkpoint budget holds about twice the states.
  EngineOptions b;
  b.max_num_seqs = 32;
  b.checkpoint_cache_bytes = 256 << 20;
  EXPECT_EQ(engine_state_slots(hybrid, b), 32 + 122);  // 2,195,456 bytes a state
  b.state_dtype = DType::BF16;
  EXPECT_EQ(engine_cache_spec(hybrid, b).state_bytes_per_seq, 98304 + 1048576);
  EXPECT_EQ(engine_state_slots(hybrid, b), 32 + 234);
}

// The delta rule's chunk scratch is counted for the chunks a step of the engine's sequences can
// make: each sequence one partial chunk, one a boundary save (at most 4) and one a draft's verify
// save. Random steps within those rules stay within the bound the plan counts (EngineCore checks
// every real step against it too), and fewer sequences count less scratch.
TEST(MemoryPlan, DeltaRuleScratchCountsTheChunksOfTheEnginesSteps) {
  EXPECT_EQ(gdn_phases_spare_chunks(1, 0), 5);
  EXPECT_EQ(gdn_phases_spare_chunks(1, 3), 8);
  EXPECT_EQ(gdn_phases_spare_chunks(4, 2), 28);
  EXPECT_EQ(gdn_phases_spare_chunks(256, 0), kGdnPhasesSpareChunks);
  std::mt19937 rng(11);
  int checked = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t max_seqs = 1 + rng() % 8, spec = rng() % 4;
    Batch b;
    b.seq_starts = {0};
    b.state_save_starts = {0};
    const int64_t seqs = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_seqs));
    for (int64_t s = 0; s < seqs; ++s) {
      const int32_t len = 1 + static_cast<int32_t>(rng() % 300);
      // Saves at distinct token counts in [1, len]: at most 4 + spec of them.
      std::vector<int32_t> after;
      const int64_t saves = static_cast<int64_t>(rng() % static_cast<uint64_t>(5 + spec));
      for (int64_t i = 0; i < saves; ++i) after.push_back(1 + static_cast<int32_t>(rng() % len));
      std::sort(after.begin(), after.end());
      after.erase(std::unique(after.begin(), after.end()), after.end());
      b.seq_starts.push_back(b.seq_starts.back() + len);
      b.state_save_after.insert(b.state_save_after.end(), after.begin(), after.end());
      b.state_save_starts.push_back(static_cast<int32_t>(b.state_save_after.size()));
    }
    // At kGdnPhasesSpareChunks the backend's own limit decides (a batch past it takes the one
    // kernel, without scratch); below it, no step of these sequences passes the count.
    const int64_t T = b.seq_starts.back(), spare = gdn_phases_spare_chunks(max_seqs, spec);
    if (spare == kGdnPhasesSpareChunks) continue;
    EXPECT_LE(gdn_chunk_bound(b, 1), (T + kGdnChunkTokens - 1) / kGdnChunkTokens + spare)
        << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 500);
  // Qwen3.5-27B's 48 value heads of 128 at a 2,048-token step: one sequence counts 37 chunks,
  // the default 64.
  const size_t one =
      estimate_gdn_phases_scratch_bytes(2048, 48, 128, gdn_phases_spare_chunks(1, 0));
  const size_t any = estimate_gdn_phases_scratch_bytes(2048, 48, 128);
  EXPECT_EQ(any, estimate_gdn_phases_scratch_bytes(2048, 48, 128, kGdnPhasesSpareChunks));
  EXPECT_EQ(any - one, static_cast<size_t>(27 * 48 * (64 * (2 * 128 + 3 * 128) * 4 + 4) + 27 * 16));
}

// The MoE tiled path's scratch counted with a step's activations: by hand for Qwen3-Next's shape
// (512 experts, top 10, hidden 2048, experts 512 wide) at a 2,048-token step, one pass; past the
// pass budget the count stops growing with the step; nothing for a dense model.
TEST(MemoryPlan, MoeScratchIsTheTiledPathsPass) {
  const int64_t P = 2048 * 10;
  auto aligned = [](int64_t b) { return (b + 255) / 256 * 256; };
  const int64_t tiles = (P + cuda::kMoeMinTileRows - 1) / cuda::kMoeMinTileRows + 512;
  EXPECT_EQ(estimate_moe_scratch_bytes(2048, 10, 512, 2048, 512),
            static_cast<size_t>(aligned(4) + aligned(16 * tiles) + aligned(4 * P) +
                                aligned(2 * P * 512) + aligned(2 * P * 2048)));
  // 1 GiB of act and y rows a pass: 20,971 tokens of this shape.
  EXPECT_EQ(cuda::moe_pass_tokens({1 << 20, 10, 512, 2048, 512}),
            cuda::kMoePassBudget / (10 * (2 * 512 + 2 * 2048)));
  EXPECT_EQ(estimate_moe_scratch_bytes(1 << 20, 10, 512, 2048, 512),
            estimate_moe_scratch_bytes(1 << 21, 10, 512, 2048, 512));
  EXPECT_LE(estimate_moe_scratch_bytes(1 << 20, 10, 512, 2048, 512),
            static_cast<size_t>(cuda::kMoePassBudget) + (size_t{64} << 20));
  EXPECT_EQ(estimate_moe_scratch_bytes(2048, 0, 0, 2048, 0), 0u);
}

}  // namespace
}  // namespace syv
