// The quantized tile GEMM's K split (backend/cuda/quant_gemm_split.h): every chunk of K in exactly
// one split, the splits' partial sums within the workspace, and the wave rule (the default) never
// costlier than the rule it replaced by its own measure, over the shapes the models use.
#include "backend/cuda/quant_gemm_split.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace syv::cuda {
namespace {

constexpr QGemmSplitShape kShape{64, 128, 3, 4};  // quant_gemm_mma.cu's

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The wave rule's measure: waves x (each block's chunks + the ring's fill).
int64_t cost(const QGemmSplit& s, int64_t n, int64_t tokens, int64_t tile, int64_t slots) {
  const int64_t blocks = ceil_div(n, kShape.rows_per_block) * ceil_div(tokens, tile);
  return ceil_div(blocks * s.splits, slots) * (s.chunks_per_split + kShape.stages - 1);
}

struct Case {
  int64_t n, k;
};
// Qwen3-8B's qkv, o_proj, gate_up, down; Qwen3.5-27B's gate_up and down; a narrow one; K of one
// chunk and of a few.
const std::vector<Case> kCases = {{6144, 4096},  {4096, 4096},  {24576, 4096}, {4096, 12288},
                                  {34816, 5120}, {5120, 17408}, {256, 4096},   {4096, 128},
                                  {1024, 384},   {2048, 640}};

TEST(QuantGemmSplit, EveryChunkInOneSplitWithinTheWorkspace) {
  for (const Case& c : kCases) {
    const int64_t chunks = c.k / kShape.chunk;
    for (int64_t tokens : {17, 24, 32, 48, 64, 96, 128}) {
      for (int64_t tile : {16, 24, 40, 48, 64}) {
        for (int64_t slots : {0, 132, 264, 2 * 78}) {
          for (size_t workspace : {size_t{0}, size_t(c.n * c.k * 2)}) {
            const QGemmSplit s = qgemm_split(kShape, c.n, c.k, tokens, tile, 132, workspace, slots);
            SCOPED_TRACE(::testing::Message()
                         << "n " << c.n << " k " << c.k << " tokens " << tokens << " tile " << tile
                         << " slots " << slots << " workspace " << workspace);
            ASSERT_GE(s.chunks_per_split, 1);
            EXPECT_EQ(s.splits, ceil_div(chunks, s.chunks_per_split));
            // the last split takes 1 .. chunks_per_split chunks
            EXPECT_GE(s.splits * s.chunks_per_split, chunks);
            EXPECT_LT((s.splits - 1) * s.chunks_per_split, chunks);
            if (s.splits > 1) {
              EXPECT_LE(static_cast<size_t>(s.splits * tokens * c.n * 4), workspace);
              EXPECT_GE(s.chunks_per_split, kShape.min_chunks_per_split);
            }
          }
        }
      }
    }
  }
}

TEST(QuantGemmSplit, WaveRuleNeverCostsMoreThanTheTwoBlocksRule) {
  for (const Case& c : kCases) {
    for (int64_t tokens : {17, 24, 32, 48, 64, 96, 128}) {
      for (int64_t blocks_per_sm : {1, 2, 3}) {
        const int64_t sms = 132, tile = tokens > 64 ? 48 : 64, slots = sms * blocks_per_sm;
        const size_t workspace = size_t(c.n * c.k * 2);
        const QGemmSplit waves = qgemm_split(kShape, c.n, c.k, tokens, tile, sms, workspace, slots);
        const QGemmSplit old = qgemm_split(kShape, c.n, c.k, tokens, tile, sms, workspace, 0);
        EXPECT_LE(cost(waves, c.n, tokens, tile, slots), cost(old, c.n, tokens, tile, slots))
            << "n " << c.n << " k " << c.k << " tokens " << tokens << " blocks/SM "
            << blocks_per_sm;
      }
    }
  }
}

// The example of the header: the 8B's int4 gate_up at 64 tokens, 384 blocks on 132 SMs holding 2
// each. The old rule keeps K whole (two waves of 32 chunks, the second 45% full); the wave rule
// splits it in two (three waves of 16: cost 3 x 18 = 54 against 2 x 34 = 68).
TEST(QuantGemmSplit, EightBGateUpAtSixtyFourTokens) {
  const size_t workspace = size_t{24576} * 4096 * 2;
  const QGemmSplit old = qgemm_split(kShape, 24576, 4096, 64, 64, 132, workspace, 0);
  EXPECT_EQ(old.splits, 1);
  EXPECT_EQ(old.chunks_per_split, 32);
  const QGemmSplit waves = qgemm_split(kShape, 24576, 4096, 64, 64, 132, workspace, 264);
  EXPECT_EQ(waves.splits, 2);
  EXPECT_EQ(waves.chunks_per_split, 16);
  EXPECT_EQ(cost(waves, 24576, 64, 64, 264), 54);
  EXPECT_EQ(cost(old, 24576, 64, 64, 264), 68);
}

// Without room for partial sums the GEMM keeps K whole under either rule.
TEST(QuantGemmSplit, NoWorkspaceNoSplit) {
  for (int64_t slots : {0, 264}) {
    const QGemmSplit s = qgemm_split(kShape, 4096, 4096, 24, 24, 132, 0, slots);
    EXPECT_EQ(s.splits, 1);
    EXPECT_EQ(s.chunks_per_split, 32);
  }
}

}  // namespace
}  // namespace syv::cuda
