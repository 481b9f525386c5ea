// Embedding gather and row gather.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

template <typename TT, typename TO>
__global__ void embedding_kernel(const TT* __restrict__ table, int64_t vocab, int64_t hidden,
                                 const int32_t* __restrict__ ids, TO* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool valid = id >= 0 && id < vocab;
  const TT* row = table + (valid ? id : 0) * hidden;
  TO* dst = out + t * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x)
    dst[i] = from_f32<TO>(valid ? to_f32(row[i]) : 0.f);
}

// Copies row_bytes (a multiple of 4) per row, 4 bytes at a time.
__global__ void gather_rows_kernel(const uint32_t* __restrict__ x, int64_t row_words,
                                   const int32_t* __restrict__ rows, uint32_t* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int64_t r = blockIdx.x;
  const uint32_t* src = x + static_cast<int64_t>(rows[r]) * row_words;
  for (int64_t i = threadIdx.x; i < row_words; i += blockDim.x) out[r * row_words + i] = src[i];
}

}  // namespace

void launch_embedding(const void* table, DType table_t, int64_t vocab, int64_t hidden,
                      const int32_t* ids, int64_t tokens, void* out, DType out_t, cudaStream_t s) {
  if (tokens == 0) return;
  SYV_DISPATCH_FLOAT(table_t, TT, [&] {
    SYV_DISPATCH_FLOAT(out_t, TO, [&] {
      launch_k(embedding_kernel<TT, TO>, static_cast<unsigned>(tokens), 256, 0, s,
               static_cast<const TT*>(table), vocab, hidden, ids, static_cast<TO*>(out));
    });
  });
}

void launch_gather_rows(const void* x, DType, int64_t row_bytes, const int32_t* rows, int64_t count,
                        void* out, cudaStream_t s) {
  if (count == 0) return;
  if (row_bytes % 4 != 0)
    cuda_fail(__FILE__, __LINE__, "row_bytes % 4", "row size not 4-byte aligned");
  launch_k(gather_rows_kernel, static_cast<unsigned>(count), 256, 0, s,
           static_cast<const uint32_t*>(x), row_bytes / 4, rows, static_cast<uint32_t*>(out));
}

}  // namespace syv::cuda
