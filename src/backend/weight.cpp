#include "backend/weight.h"

#include <algorithm>

#include "backend/quant_layout.h"
#include "core/check.h"

namespace syv {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kDense:
      return "dense";
    case WeightFormat::kFp8Block:
      return "fp8 block-scaled";
    case WeightFormat::kInt4Group:
      return "int4 group-quantized";
  }
  return "?";
}

std::string Weight::describe() const {
  std::string s = std::string(weight_format_name(format)) + " weights (" +
                  std::string(dtype_name(tensor.dtype));
  switch (format) {
    case WeightFormat::kDense:
      break;
    case WeightFormat::kFp8Block:
      s += ", " + std::to_string(block_n) + "x" + std::to_string(block_k) + " blocks";
      break;
    case WeightFormat::kInt4Group:
      s += ", groups of " + std::to_string(group_size) +
           (zeros.empty() ? "" : " with zero points") + (g_idx.empty() ? "" : ", act-order") +
           (perm.empty() ? "" : ", act-order permuted");
      break;
  }
  return s + ")";
}

void check_quantized_layout(const Weight& w) {
  const int64_t N = w.n, K = w.k;
  SYV_CHECK(w.tensor.ndim == 2 && w.scales.ndim == 2 && w.scales.dtype == DType::F32)
      << "dequantize: " << w.describe() << " needs a 2-D tensor and 2-D f32 scales";
  if (w.format == WeightFormat::kFp8Block) {
    SYV_CHECK(w.tensor.dtype == DType::F8E4M3 && w.tensor.dim(0) == N && w.tensor.dim(1) == K &&
              w.block_n > 0 && w.block_k > 0 &&
              w.scales.dim(0) == (N + w.block_n - 1) / w.block_n &&
              w.scales.dim(1) == (K + w.block_k - 1) / w.block_k)
        << "dequantize: fp8 weight [" << N << ", " << K << "] with " << w.block_n << "x"
        << w.block_k << " blocks has tensor [" << w.tensor.dim(0) << ", " << w.tensor.dim(1)
        << "] and scales [" << w.scales.dim(0) << ", " << w.scales.dim(1) << "]";
    return;
  }
  SYV_CHECK(w.format == WeightFormat::kInt4Group) << "dequantize: " << w.describe();
  const int64_t G = w.scales.dim(1);
  SYV_CHECK(w.tensor.dtype == DType::U4X2 && K % 2 == 0 && w.tensor.dim(0) == N &&
            w.tensor.dim(1) == K / 2 && w.scales.dim(0) == N)
      << "dequantize: int4 weight [" << N << ", " << K << "] has tensor [" << w.tensor.dim(0)
      << ", " << w.tensor.dim(1) << "], scales [" << w.scales.dim(0) << ", " << G << "]";
  SYV_CHECK(w.zeros.empty() || (w.zeros.dtype == DType::U8 && w.zeros.ndim == 2 &&
                                w.zeros.dim(0) == N && w.zeros.dim(1) == G))
      << "dequantize: int4 zeros must be u8 [" << N << ", " << G << "]";
  SYV_CHECK(w.perm.empty() ||
            (w.g_idx.empty() && w.perm.dtype == DType::I32 && w.perm.numel() == K))
      << "dequantize: perm must be i32 [" << K << "], and g_idx empty beside it";
  if (w.g_idx.empty()) {
    SYV_CHECK(w.group_size > 0 && K % w.group_size == 0 && G == K / w.group_size)
        << "dequantize: int4 groups of " << w.group_size << " over K " << K << " vs " << G
        << " scale columns";
  } else {
    SYV_CHECK(w.g_idx.dtype == DType::I32 && w.g_idx.numel() == K)
        << "dequantize: g_idx must be i32 [" << K << "]";
  }
}

void dequantize_rows(const Weight& w, int64_t row0, int64_t rows, float* out) {
  SYV_CHECK(row0 >= 0 && rows >= 0 && row0 + rows <= w.n)
      << "dequantize_rows [" << row0 << ", +" << rows << ") of " << w.n << " rows";
  const int64_t K = w.k;
  if (w.format == WeightFormat::kDense) {
    SYV_CHECK(w.tensor.ndim == 2 && w.tensor.dim(0) == w.n && w.tensor.dim(1) == K)
        << "dequantize_rows: dense weights must be 2-D";
    const size_t esize = dtype_size(w.tensor.dtype);
    convert_to_f32(w.tensor.dtype, static_cast<const uint8_t*>(w.tensor.data) + row0 * K * esize,
                   out, static_cast<size_t>(rows * K));
    return;
  }
  check_quantized_layout(w);
  if (!w.perm.empty()) {  // (host memory here; the layout check reads no values: CUDA's are on
                          // the device)
    const int32_t* perm = w.perm.as<const int32_t>();
    for (int64_t k = 0; k < K; ++k)
      SYV_CHECK(perm[k] >= 0 && perm[k] < K) << "dequantize: perm[" << k << "] = " << perm[k];
  }
  const float* scales = w.scales.as<const float>();
  const int64_t S = w.scales.dim(1);
  if (w.format == WeightFormat::kFp8Block) {
    const auto* q = static_cast<const uint8_t*>(w.tensor.data);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = row0 + r;
      const float* srow = scales + (n / w.block_n) * S;
      for (int64_t k = 0; k < K; ++k) {
        out[r * K + k] = fp8_e4m3_to_f32(q[n * K + k]) * srow[k / w.block_k];
      }
    }
    return;
  }
  const auto* q = static_cast<const uint8_t*>(w.tensor.data);
  const auto* z = w.zeros.empty() ? nullptr : static_cast<const uint8_t*>(w.zeros.data);
  const int32_t* g_idx = w.g_idx.empty() ? nullptr : w.g_idx.as<const int32_t>();
  const int32_t* perm = w.perm.empty() ? nullptr : w.perm.as<const int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = row0 + r;
    for (int64_t k = 0; k < K; ++k) {  // k: the stored column (the input column perm[k])
      const int64_t g = g_idx ? g_idx[k] : k / w.group_size;
      SYV_CHECK(g >= 0 && g < S) << "dequantize: g_idx[" << k << "] = " << g << " outside [0, " << S
                                 << ")";
      const uint8_t byte = q[n * (K / 2) + k / 2];
      const int32_t v = (k % 2 == 0) ? u4_low(byte) : u4_high(byte);
      const int32_t zero = z ? z[n * S + g] : 8;
      out[r * K + (perm ? perm[k] : k)] = static_cast<float>(v - zero) * scales[n * S + g];
    }
  }
}

}  // namespace syv
