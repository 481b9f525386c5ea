// Pre-quantized checkpoint tensors -> the canonical quantized layouts of backend/weight.h.
//
// Which tensors a module has decides how it is read (config.json's quantization_config decides
// how to interpret them; io/quant_config.h). For the weight spec "<m>.weight" [N, K]:
//   fp8 (Qwen / DeepSeek-V3)     <m>.weight f8e4m3 [N, K], <m>.weight_scale_inv f32
//                                [ceil(N/bn), ceil(K/bk)]
//   compressed-tensors fp8       <m>.weight f8e4m3 [N, K], <m>.weight_scale: [N, 1] (channel),
//                                [1] / [] (tensor) or [ceil(N/bn), ceil(K/bk)] (block)
//   awq (gemm)                   <m>.qweight i32 [K, N/8], <m>.qzeros i32 [K/G, N/8],
//                                <m>.scales f16 [K/G, N]
//   gptq                         <m>.qweight i32 [K/8, N], <m>.qzeros i32 [K/G, N/8],
//                                <m>.scales f16 [K/G, N], <m>.g_idx i32 [K] (optional)
//   compressed-tensors int4      <m>.weight_packed i32 [N, K/8], <m>.weight_scale [N, K/G],
//                                <m>.weight_shape i64 [2], <m>.weight_zero_point i32
//                                [ceil(N/8), K/G] (asymmetric), <m>.weight_g_idx i32 [K]
// A module whose float "<m>.weight" is present instead is a module kept unquantized
// (modules_to_not_convert / ignore) and loads as before. Every size is checked before a byte is
// read; errors name the file, the tensor, the expected and the found shape / dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/weight.h"
#include "core/status.h"
#include "io/quant_config.h"
#include "io/safetensors.h"

namespace syv {

// A quantized weight on the host in the canonical layout (backend/weight.h), owning its bytes.
struct HostQuantWeight {
  WeightFormat format = WeightFormat::kFp8Block;
  int64_t n = 0, k = 0;              // logical [N, K]
  int32_t block_n = 0, block_k = 0;  // kFp8Block
  int32_t group_size = 0;            // kInt4Group (0 with g_idx: groups by g_idx only)
  std::vector<uint8_t> data;         // f8e4m3 [N, K] or u4x2 [N, K / 2]
  std::vector<float> scales;         // [scale_rows, scale_cols]
  int64_t scale_rows = 0, scale_cols = 0;
  std::vector<uint8_t> zeros;  // kInt4Group: u8 [N, scale_cols]; empty: z = 8
  std::vector<int32_t> g_idx;  // kInt4Group: [K] or empty (k / group_size)
  std::vector<int32_t> perm;   // kInt4Group: [K] after permute_act_order(), else empty

  // A Weight viewing this object's vectors (valid while it lives, unmoved).
  Weight view();
  // The logical [N, K] weight as f32 (what every kernel must compute with).
  std::vector<float> dequantize();
};

// Whether the spec's module is stored quantized for this config (its quantized tensors are
// present); false for a float checkpoint and for modules kept in float.
bool stored_quantized(const std::string& weight_name, const WeightStore& store,
                      const QuantConfig& quant);

// Checks the module's quantized tensors against the spec's logical shape [N, K] (dtypes, shapes,
// group size dividing K, weight_shape) without reading their data beyond weight_shape.
Status check_quantized(const std::string& weight_name, const std::vector<int64_t>& shape,
                       const WeightStore& store, const QuantConfig& quant);

// Reads the module into the canonical layout (check_quantized first; also checks g_idx values).
Result<HostQuantWeight> read_quantized(const std::string& weight_name,
                                       const std::vector<int64_t>& shape, const WeightStore& store,
                                       const QuantConfig& quant);

// Bytes of the canonical form of a [N, K] weight of this config (the memory plan's figure).
int64_t quantized_weight_bytes(const std::vector<int64_t>& shape, const QuantConfig& quant,
                               bool has_g_idx);

// What one checkpoint tensor is, for counting what a folder holds (`syv inspect`): the data of a
// module stored quantized (f8e4m3 weight, or int4 words: 8 logical parameters per i32), one of its
// scales / zeros / g_idx / weight_shape (no parameters of their own), or any other tensor (kept in
// float, or a float checkpoint's). Goes by the tensor's name and dtype and by whether its module's
// data tensor is there; nothing is read.
enum class StoredRole : uint8_t { kFloat, kQuantizedData, kQuantizedAux };
struct StoredTensorRole {
  StoredRole role = StoredRole::kFloat;
  int64_t parameters = 0;  // logical parameters it stands for (0 for kQuantizedAux)
};
StoredTensorRole stored_tensor_role(const std::string& name, const TensorInfo& tensor,
                                    const WeightStore& store, const QuantConfig& quant);
// The logical [N, K] of a module's data tensor (kQuantizedData above) as the config's format packs
// it: fp8 weight [N, K] as it is, gptq qweight [K/8, N], awq qweight [K, N/8], compressed-tensors
// weight_packed [N, K/8] (8 int4 a word); empty for a tensor that is not 2-D.
std::vector<int64_t> quantized_logical_shape(const TensorInfo& data, const QuantConfig& quant);

// Parts stacked along N (q|k|v, gate|up) as one canonical weight, or nullopt when they cannot
// share one (a part in another format, different K / block_k / groups / g_idx): the caller then
// loads the dequantized parts densely. fp8 parts whose N does not fall on block_n boundaries get
// one scale row per weight row (block_n 1), which is exact.
std::optional<HostQuantWeight> concat_quantized(std::vector<HostQuantWeight> parts);

// Act-order int4 (a g_idx) re-laid so that its groups are contiguous, as backend/weight.h's perm
// describes: the columns stably sorted by group, perm = that order, each row's nibbles moved
// with them, g_idx cleared. False (w unchanged) when there is no g_idx or its groups are not all
// group_size columns.
bool permute_act_order(HostQuantWeight& w);

// Rows [first, first + count) of w, exactly (a hybrid's interleaved query / gate rows of q_proj):
// int4 rows keep their scales, zeros and g_idx; fp8 keeps whole scale tiles when the slice starts
// and ends on tile boundaries (or ends at the last row), else one scale row per weight row.
HostQuantWeight slice_rows(const HostQuantWeight& w, int64_t first, int64_t count);

}  // namespace syv
