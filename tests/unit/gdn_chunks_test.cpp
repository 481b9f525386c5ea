// The chunked gated delta rule's chunks (backend/gdn_chunks.h): what CUDA's chunk table emits for
// a sequence and the host's bound on a batch's count, which sizes that table's scratch (a count
// over the bound would stop the kernel).
#include "backend/gdn_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace syv {
namespace {

struct Chunk {
  int32_t c0, len, save;
};

std::vector<Chunk> chunks_of(int32_t len, const std::vector<int32_t>& after) {
  std::vector<Chunk> out;
  for_each_gdn_chunk(len, after.data(), static_cast<int32_t>(after.size()),
                     [&](int32_t c0, int32_t L, int32_t save) {
                       out.push_back({c0, L, save});
                     });
  return out;
}

TEST(GdnChunks, CutEvery64TokensAndAtEachSave) {
  const std::vector<Chunk> plain = chunks_of(130, {});
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[0].len, 64);
  EXPECT_EQ(plain[1].c0, 64);
  EXPECT_EQ(plain[2].len, 2);
  // Saves after 10 and 64 tokens (the second on a chunk's edge) and at the end: chunks restart at
  // each save.
  const std::vector<Chunk> saved = chunks_of(130, {10, 64, 130});
  ASSERT_EQ(saved.size(), 4u);
  EXPECT_EQ(saved[0].len, 10);
  EXPECT_EQ(saved[0].save, 0);
  EXPECT_EQ(saved[1].c0, 10);
  EXPECT_EQ(saved[1].len, 54);
  EXPECT_EQ(saved[1].save, 1);
  EXPECT_EQ(saved[2].c0, 64);
  EXPECT_EQ(saved[2].len, 64);
  EXPECT_EQ(saved[2].save, -1);
  EXPECT_EQ(saved[3].len, 2);
  EXPECT_EQ(saved[3].save, 2);
}

// Random sequences and saves: the chunks tile each sequence in order, none longer than 64, each
// save ends exactly one chunk at its token count, and the batch's count never passes
// gdn_chunk_bound() (sequences under chunked_from take no chunks).
TEST(GdnChunks, BatchesNeverPassTheBound) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    Batch b;
    b.seq_starts = {0};
    b.state_save_starts = {0};
    const int32_t seqs = 1 + static_cast<int32_t>(rng() % 12), chunked_from = 16;
    int64_t chunks = 0;
    for (int32_t s = 0; s < seqs; ++s) {
      const int32_t len = 1 + static_cast<int32_t>(rng() % 400);
      std::vector<int32_t> after;
      for (int32_t t = 1; t <= len; ++t)
        if (rng() % 50 == 0) after.push_back(t);
      b.seq_starts.push_back(b.seq_starts.back() + len);
      b.state_save_after.insert(b.state_save_after.end(), after.begin(), after.end());
      b.state_save_starts.push_back(static_cast<int32_t>(b.state_save_after.size()));
      if (len < chunked_from) continue;
      const std::vector<Chunk> cs = chunks_of(len, after);
      int32_t at = 0;
      size_t saves_seen = 0;
      for (const Chunk& c : cs) {
        EXPECT_EQ(c.c0, at);
        EXPECT_LE(c.len, kGdnChunkTokens);
        at += c.len;
        if (c.save >= 0) {
          ASSERT_LT(static_cast<size_t>(c.save), after.size());
          EXPECT_EQ(after[static_cast<size_t>(c.save)], at);
          EXPECT_EQ(static_cast<size_t>(c.save), saves_seen);
          ++saves_seen;
        }
      }
      EXPECT_EQ(at, len);
      EXPECT_EQ(saves_seen, after.size());
      chunks += static_cast<int64_t>(cs.size());
    }
    b.state_save_dests.assign(b.state_save_after.size(), 0);
    EXPECT_LE(chunks, gdn_chunk_bound(b, chunked_from)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace syv
