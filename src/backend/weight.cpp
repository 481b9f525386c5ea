#include "backend/weight.h"

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
      s += ", groups of " + std::to_string(group_size) + (zeros.empty() ? "" : " with zero points");
      break;
  }
  return s + ")";
}

}  // namespace syv
