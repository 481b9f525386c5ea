// Probe: how far is cuBLASLt's first heuristic algorithm from the fastest of its top candidates at
// decode shapes (the Qwen3-8B shape's linears, bf16, f32 compute), as syv's LtGemm::plan() sets
// them up (C[N x T] = W^T[N x K] . X[K x T], column major)? Prints per (T, N, K): the first
// algorithm's time, the fastest candidate's, its index, and the fastest's rate against the
// weight-bytes floor at the copy rate measured here.
//   nvcc -O2 -arch=sm_90a gemm_algos.cu -lcublasLt -o gemm_algos && ./gemm_algos
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CK(x)                                                              \
  do {                                                                     \
    auto e_ = (x);                                                         \
    if (static_cast<int>(e_) != 0) {                                       \
      std::printf("error %d at %s:%d\n", static_cast<int>(e_), __FILE__, __LINE__); \
      return 1;                                                            \
    }                                                                      \
  } while (0)

int main() {
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  const size_t ws_bytes = 32 << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  const int64_t maxK = 12288, maxN = 151936, maxT = 512;
  void *x, *w, *c;
  CK(cudaMalloc(&x, maxK * maxT * 2));
  CK(cudaMalloc(&w, maxN * 4096 * 2 > maxK * 4096 * 2 ? maxN * 4096 * 2 : maxK * 4096 * 2));
  CK(cudaMalloc(&c, maxN * maxT * 2));
  CK(cudaMemset(x, 0x3c, maxK * maxT * 2));
  CK(cudaMemset(w, 0x3c, maxN * 4096 * 2));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  // copy rate
  float ms = 0;
  void* big;
  const size_t bb = 4ull << 30;
  CK(cudaMalloc(&big, bb));
  cudaMemcpy(big, static_cast<char*>(big) + bb / 2, bb / 2, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e0);
  for (int i = 0; i < 5; ++i)
    cudaMemcpy(big, static_cast<char*>(big) + bb / 2, bb / 2, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  cudaEventElapsedTime(&ms, e0, e1);
  const double copy_gbs = 5.0 * bb / (ms * 1e-3) / 1e9;  // read + write bytes
  std::printf("copy rate %.0f GB/s (read + write)\n", copy_gbs);
  cudaFree(big);
  struct Shape {
    const char* name;
    int64_t n, k;
  } shapes[] = {{"qkv", 6144, 4096},
                {"o", 4096, 4096},
                {"gate_up", 24576, 4096},
                {"down", 4096, 12288},
                {"lm_head", 151936, 4096}};
  for (int64_t T : {1, 8, 16, 32, 64, 128, 256, 512}) {
    double sum_first = 0, sum_best = 0, sum_floor = 0;
    for (const Shape& s : shapes) {
      cublasLtMatmulDesc_t d;
      CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      cublasLtMatrixLayout_t a, b, cc;
      CK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, s.k, s.n, s.k));
      CK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, s.k, T, s.k));
      CK(cublasLtMatrixLayoutCreate(&cc, CUDA_R_16BF, s.n, T, s.n));
      cublasLtMatmulPreference_t pref;
      CK(cublasLtMatmulPreferenceCreate(&pref));
      CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &ws_bytes, sizeof(ws_bytes)));
      cublasLtMatmulHeuristicResult_t r[16];
      int found = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(h, d, a, b, cc, cc, pref, 16, r, &found));
      const float alpha = 1.f, beta = 0.f;
      std::vector<double> t(found, 1e9);
      for (int i = 0; i < found; ++i) {
        auto run = [&] {
          return cublasLtMatmul(h, d, &alpha, w, a, x, b, &beta, c, cc, c, cc, &r[i].algo, ws,
                                ws_bytes, 0);
        };
        if (run() != CUBLAS_STATUS_SUCCESS) continue;
        for (int j = 0; j < 3; ++j) run();
        cudaEventRecord(e0);
        const int reps = 20;
        for (int j = 0; j < reps; ++j) run();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        t[i] = ms * 1e3 / reps;  // us
      }
      const int best = static_cast<int>(std::min_element(t.begin(), t.end()) - t.begin());
      const double floor_us = (s.n * s.k * 2.0 + s.k * T * 2.0 + s.n * T * 2.0) /
                              (copy_gbs / 2 * 1e9) * 1e6;
      std::printf("T=%4ld %-8s N=%6ld K=%5ld: first %8.1f us, best %8.1f us (#%d of %d), floor %7.1f us: %5.1f%% -> %5.1f%%\n",
                  (long)T, s.name, (long)s.n, (long)s.k, t[0], t[best], best, found, floor_us,
                  100 * floor_us / t[0], 100 * floor_us / t[best]);
      sum_first += t[0];
      sum_best += t[best];
      sum_floor += floor_us;
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(a);
      cublasLtMatrixLayoutDestroy(b);
      cublasLtMatrixLayoutDestroy(cc);
      cublasLtMatmulDescDestroy(d);
    }
    std::printf("T=%4ld all five: first %.1f us, best %.1f us (%.1f%% faster); floor %.1f us\n",
                (long)T, sum_first, sum_best, 100 * (sum_first / sum_best - 1), sum_floor);
  }
  return 0;
}
