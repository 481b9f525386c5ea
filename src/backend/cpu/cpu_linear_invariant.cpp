// CPU backend, batch-invariant mode (Backend::set_batch_invariant): a linear layer whose every
// output element is summed in one fixed order whatever T is.
//
// OpenBLAS is not batch-invariant: on this project's dev machine (OpenBLAS 0.3.21) a row of
// sgemv (what linear() uses for one token) never equals the same row of sgemm, and sgemm rows
// change with M (tests/unit/cpu_batch_invariance_test.cpp shows it). So this mode has its own
// kernel: element (t, n) is 8 interleaved partial sums (lane l takes k = l, l + 8, l + 16, ... in
// increasing order; the K % 8 tail goes to lanes 0..), added as ((l0 + l1) + (l2 + l3)) +
// ((l4 + l5) + (l6 + l7)). Every element goes through the same code: partial blocks point their
// missing rows at a zero row instead of taking a different loop, and threads split the output
// columns, never K.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"

namespace syv::cpu {
namespace {

constexpr int kLanes = 8;
constexpr int kTokensPerBlock = 4;  // register block: 4 tokens x 4 weight rows
constexpr int kRowsPerBlock = 4;
constexpr int64_t kTokensPerChunk = 64;  // tokens whose rows stay in cache across weight blocks

// out[t0 .. t0 + 4, n0 .. n0 + 4] for rows given as pointers (missing ones point at zeros).
void block_4x4(const float* const* xr, const float* const* wr, int64_t K, float (&res)[4][4]) {
  float acc[kTokensPerBlock][kRowsPerBlock][kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) {
    for (int i = 0; i < kTokensPerBlock; ++i)
      for (int j = 0; j < kRowsPerBlock; ++j)
        for (int l = 0; l < kLanes; ++l) acc[i][j][l] += xr[i][k + l] * wr[j][k + l];
  }
  for (int l = 0; k + l < K; ++l)
    for (int i = 0; i < kTokensPerBlock; ++i)
      for (int j = 0; j < kRowsPerBlock; ++j) acc[i][j][l] += xr[i][k + l] * wr[j][k + l];
  for (int i = 0; i < kTokensPerBlock; ++i)
    for (int j = 0; j < kRowsPerBlock; ++j) {
      const float* a = acc[i][j];
      res[i][j] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    }
}

}  // namespace

void linear_invariant(const float* x, const float* w, float* out, int64_t T, int64_t N, int64_t K) {
  if (T == 0 || N == 0) return;
  const std::vector<float> zero(static_cast<size_t>(std::max<int64_t>(K, 1)), 0.f);
  const int64_t row_blocks = (N + kRowsPerBlock - 1) / kRowsPerBlock;
  ThreadPool::global().parallel_for(row_blocks, [&](int64_t begin, int64_t end) {
    for (int64_t c0 = 0; c0 < T; c0 += kTokensPerChunk) {
      const int64_t c1 = std::min(T, c0 + kTokensPerChunk);
      for (int64_t b = begin; b < end; ++b) {
        const int64_t n0 = b * kRowsPerBlock;
        const float* wr[kRowsPerBlock];
        for (int j = 0; j < kRowsPerBlock; ++j) wr[j] = n0 + j < N ? w + (n0 + j) * K : zero.data();
        for (int64_t t0 = c0; t0 < c1; t0 += kTokensPerBlock) {
          const float* xr[kTokensPerBlock];
          for (int i = 0; i < kTokensPerBlock; ++i)
            xr[i] = t0 + i < c1 ? x + (t0 + i) * K : zero.data();
          float res[kTokensPerBlock][kRowsPerBlock];
          block_4x4(xr, wr, K, res);
          for (int i = 0; i < kTokensPerBlock && t0 + i < c1; ++i)
            for (int j = 0; j < kRowsPerBlock && n0 + j < N; ++j)
              out[(t0 + i) * N + n0 + j] = res[i][j];
        }
      }
    }
  });
}

}  // namespace syv::cpu
