// Reading pre-quantized checkpoints into backend/weight.h's canonical layouts. The source
// layouts, with where each was read:
//  * Qwen FP8: W[n, k] = weight[n, k] * weight_scale_inv[n / bn, k / bk] (DeepSeek-V3 FP8 doc,
//    transformers FineGrainedFP8; WAVE2-SPECS C.1).
//  * AWQ GEMM (AutoAWQ gemm_pack / vLLM tests/kernels/test_awq_triton.py): qweight[k, j] holds
//    columns 8j..8j+7 of row k of W^T, nibble i (bits 4i..4i+3) holding column 8j + AWQ_ORDER[i],
//    AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]; qzeros[g, j] the same along N; W = (q - z) * s, z raw.
//  * GPTQ (AutoGPTQ QuantLinear.pack, vLLM gptq / gptq_marlin): qweight[r, n] holds rows
//    8r..8r+7 (K) of column n, nibble i = row 8r + i; qzeros[g, j] holds columns 8j + i along N;
//    v1 ("gptq") stores z - 1 (pack does `zeros -= 1`, the kernels add 1 back), v2 stores z;
//    g_idx[k] is row k's group (act-order when not k / G).
//  * compressed-tensors pack-quantized (compressed_tensors pack_to_int32 / unpack_from_int32):
//    weight_packed[n, j] holds columns 8j..8j+7 of row n, nibble i = column 8j + i, each value the
//    signed q plus 8; weight_zero_point (asymmetric) is packed the same way along N (packed_dim
//    0): [ceil(N/8), G]; W = (q - zp) * s.
//  * compressed-tensors float-quantized: weight e4m3, weight_scale per tensor / channel / block.
#include "model/quant_weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <numeric>

#include "core/thread_pool.h"
#include "model/weight_spec.h"

namespace syv {

namespace {

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "<m>" of "<m>.weight", or "" when the name is not a weight.
std::string module_of(const std::string& weight_name) {
  return ends_with(weight_name, ".weight") ? weight_name.substr(0, weight_name.size() - 7) : "";
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// The module's tensor `name`, of dtype `want` (kF32 means any of f32 / f16 / bf16) and `shape`.
Result<const TensorInfo*> need(const WeightStore& store, const std::string& name, DType want,
                               const std::vector<int64_t>& shape, const std::string& what) {
  const TensorInfo* t = store.find(name);
  if (t == nullptr) {
    return Status::Error("missing tensor \"" + name + "\" (" + what + ", expected shape " +
                         shape_string(shape) + ") in the model's safetensors files");
  }
  const bool dtype_ok = want == DType::F32 ? is_float(t->dtype) : t->dtype == want;
  if (!dtype_ok) {
    return Status::Error(
        t->file + ": tensor \"" + name + "\" (" + what + ") has dtype " +
        std::string(dtype_name(t->dtype)) + ", expected " +
        (want == DType::F32 ? std::string("f32, f16 or bf16") : std::string(dtype_name(want))));
  }
  if (t->shape != shape) {
    return Status::Error(t->file + ": tensor \"" + name + "\" (" + what + ") has shape " +
                         shape_string(t->shape) + ", expected " + shape_string(shape));
  }
  return t;
}

Status bad_group(const std::string& name, int64_t K, int32_t G) {
  return Status::Error("tensor \"" + name + "\": group size " + std::to_string(G) +
                       " (quantization_config) does not divide K = " + std::to_string(K));
}

// Value of element i of a float tensor.
float load(const TensorInfo& t, int64_t i) {
  float f = 0.0f;
  convert_to_f32(t.dtype, static_cast<const uint8_t*>(t.data) + i * dtype_size(t.dtype), &f, 1);
  return f;
}

uint32_t word(const TensorInfo& t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, static_cast<const uint8_t*>(t.data) + i * 4, 4);
  return w;
}

uint8_t nibble(uint32_t w, int i) {
  return static_cast<uint8_t>((w >> (4 * i)) & 0xfu);
}

// The found tensors of one module, checked.
struct Found {
  const TensorInfo* data = nullptr;    // weight / qweight / weight_packed
  const TensorInfo* scales = nullptr;  // weight_scale_inv / scales / weight_scale
  const TensorInfo* zeros = nullptr;   // qzeros / weight_zero_point
  const TensorInfo* g_idx = nullptr;   // g_idx / weight_g_idx
  int32_t group = 0;                   // int4: K elements per group
  int32_t block_n = 0, block_k = 0;    // fp8
};

Result<Found> find(const std::string& weight_name, const std::vector<int64_t>& shape,
                   const WeightStore& store, const QuantConfig& q) {
  const std::string m = module_of(weight_name);
  if (shape.size() != 2) {
    return Status::Error("tensor \"" + weight_name +
                         "\": quantized weights must be 2-D, expected " + shape_string(shape));
  }
  const int64_t N = shape[0], K = shape[1];
  Found f;
  switch (q.method) {
    case QuantMethod::kNone:
      break;
    case QuantMethod::kFp8:
    case QuantMethod::kCtFloatFp8: {
      SYV_ASSIGN_OR_RETURN(f.data, need(store, weight_name, DType::F8E4M3, shape, "fp8 weight"));
      if (q.method == QuantMethod::kFp8 || q.fp8_strategy == Fp8ScaleStrategy::kBlock) {
        f.block_n = q.block_n;
        f.block_k = q.block_k;
      } else if (q.fp8_strategy == Fp8ScaleStrategy::kChannel) {
        f.block_n = 1;
        f.block_k = static_cast<int32_t>(K);
      } else {
        f.block_n = static_cast<int32_t>(N);
        f.block_k = static_cast<int32_t>(K);
      }
      const std::vector<int64_t> sshape = {ceil_div(N, f.block_n), ceil_div(K, f.block_k)};
      const std::string sname =
          m + (q.method == QuantMethod::kFp8 ? ".weight_scale_inv" : ".weight_scale");
      if (q.method == QuantMethod::kCtFloatFp8 && q.fp8_strategy == Fp8ScaleStrategy::kTensor) {
        // compressed-tensors writes a per-tensor scale as [1] (older versions: a scalar []).
        const TensorInfo* s = store.find(sname);
        if (s != nullptr && s->numel() == 1 && s->shape.size() <= 2) {
          if (!is_float(s->dtype)) {
            return Status::Error(s->file + ": tensor \"" + sname + "\" has dtype " +
                                 std::string(dtype_name(s->dtype)) + ", expected f32, f16 or bf16");
          }
          f.scales = s;
          return f;
        }
        SYV_ASSIGN_OR_RETURN(f.scales, need(store, sname, DType::F32, {1}, "per-tensor fp8 scale"));
        return f;
      }
      SYV_ASSIGN_OR_RETURN(f.scales, need(store, sname, DType::F32, sshape, "fp8 scales"));
      return f;
    }
    case QuantMethod::kAwq:
    case QuantMethod::kGptq: {
      const int32_t G = q.group_size > 0 ? q.group_size : static_cast<int32_t>(K);
      if (K % G != 0) return bad_group(m + ".qweight", K, G);
      if (N % 8 != 0 || K % 8 != 0) {
        return Status::Error("tensor \"" + m +
                             ".qweight\": int4 packing needs N and K multiples "
                             "of 8, the weight is " +
                             shape_string(shape));
      }
      f.group = G;
      const bool awq = q.method == QuantMethod::kAwq;
      const std::vector<int64_t> qshape =
          awq ? std::vector<int64_t>{K, N / 8} : std::vector<int64_t>{K / 8, N};
      SYV_ASSIGN_OR_RETURN(f.data, need(store, m + ".qweight", DType::I32, qshape,
                                        awq ? "AWQ packed weight" : "GPTQ packed weight"));
      SYV_ASSIGN_OR_RETURN(f.zeros,
                           need(store, m + ".qzeros", DType::I32, {K / G, N / 8}, "packed zeros"));
      SYV_ASSIGN_OR_RETURN(f.scales,
                           need(store, m + ".scales", DType::F32, {K / G, N}, "group scales"));
      if (!awq && store.find(m + ".g_idx") != nullptr) {
        SYV_ASSIGN_OR_RETURN(f.g_idx, need(store, m + ".g_idx", DType::I32, {K}, "group index"));
      } else if (!awq && q.act_order) {
        return Status::Error("missing tensor \"" + m +
                             ".g_idx\" (desc_act is true, expected "
                             "shape [" +
                             std::to_string(K) + "]) in the model's safetensors files");
      }
      return f;
    }
    case QuantMethod::kCtPackInt4: {
      const int32_t G = q.group_size > 0 ? q.group_size : static_cast<int32_t>(K);
      if (K % G != 0) return bad_group(m + ".weight_packed", K, G);
      if (K % 8 != 0) {
        return Status::Error("tensor \"" + m +
                             ".weight_packed\": int4 packing needs K a multiple "
                             "of 8, the weight is " +
                             shape_string(shape));
      }
      f.group = G;
      SYV_ASSIGN_OR_RETURN(
          f.data, need(store, m + ".weight_packed", DType::I32, {N, K / 8}, "packed weight"));
      SYV_ASSIGN_OR_RETURN(const TensorInfo* ws,
                           need(store, m + ".weight_shape", DType::I64, {2}, "logical shape"));
      int64_t dims[2];
      std::memcpy(dims, ws->data, sizeof dims);
      if (dims[0] != N || dims[1] != K) {
        return Status::Error(ws->file + ": tensor \"" + m + ".weight_shape\" holds [" +
                             std::to_string(dims[0]) + ", " + std::to_string(dims[1]) +
                             "], config expects " + shape_string(shape));
      }
      SYV_ASSIGN_OR_RETURN(
          f.scales, need(store, m + ".weight_scale", DType::F32, {N, K / G}, "group scales"));
      if (!q.symmetric) {
        SYV_ASSIGN_OR_RETURN(f.zeros, need(store, m + ".weight_zero_point", DType::I32,
                                           {ceil_div(N, 8), K / G}, "packed zero points"));
      }
      if (q.act_order) {
        SYV_ASSIGN_OR_RETURN(f.g_idx,
                             need(store, m + ".weight_g_idx", DType::I32, {K}, "group index"));
      }
      return f;
    }
  }
  return Status::Error("tensor \"" + weight_name + "\": no quantization method");
}

HostQuantWeight read_fp8(const Found& f, int64_t N, int64_t K) {
  HostQuantWeight w;
  w.format = WeightFormat::kFp8Block;
  w.n = N;
  w.k = K;
  w.block_n = f.block_n;
  w.block_k = f.block_k;
  w.data.assign(static_cast<const uint8_t*>(f.data->data),
                static_cast<const uint8_t*>(f.data->data) + N * K);
  w.scale_rows = ceil_div(N, f.block_n);
  w.scale_cols = ceil_div(K, f.block_k);
  w.scales.resize(static_cast<size_t>(w.scale_rows * w.scale_cols));
  for (int64_t i = 0; i < static_cast<int64_t>(w.scales.size()); ++i)
    w.scales[i] = load(*f.scales, i);
  return w;
}

// The int4 packings read below are little-endian words of nibbles, low nibble first, as our layout
// (two values a byte, the even column low): whole words copy where the orders agree.
static_assert(std::endian::native == std::endian::little, "int4 unpacking assumes little-endian");

// dst[c][r] = src[r][c] for 32-bit words (src rows x cols), in tiles, in parallel over tiles of
// columns.
void transpose_words(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  constexpr int64_t kTile = 32;
  ThreadPool::global().parallel_for(ceil_div(cols, kTile), [&](int64_t t0, int64_t t1) {
    for (int64_t c0 = t0 * kTile; c0 < std::min(cols, t1 * kTile); c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
        const int64_t r1 = std::min(rows, r0 + kTile);
        for (int64_t c = c0; c < c1; ++c) {
          for (int64_t r = r0; r < r1; ++r)
            std::memcpy(dst + (c * rows + r) * 4, src + (r * cols + c) * 4, 4);
        }
      }
    }
  });
}

Result<HostQuantWeight> read_int4(const Found& f, const std::string& m, int64_t N, int64_t K,
                                  const QuantConfig& q) {
  HostQuantWeight w;
  w.format = WeightFormat::kInt4Group;
  w.n = N;
  w.k = K;
  w.group_size = f.group;
  const int64_t G = K / f.group;
  w.scale_rows = N;
  w.scale_cols = G;
  w.data.assign(static_cast<size_t>(N * K / 2), 0);
  w.scales.resize(static_cast<size_t>(N * G));
  std::vector<uint8_t> zeros(static_cast<size_t>(N * G), 8);
  switch (q.method) {
    case QuantMethod::kAwq:
      // Rows k and k + 1 of W^T make the byte k / 2 of each of their columns: each byte
      // written once, in parallel over pairs of rows.
      ThreadPool::global().parallel_for(K / 2, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          for (int64_t j = 0; j < N / 8; ++j) {
            const uint32_t lo = word(*f.data, 2 * p * (N / 8) + j);
            const uint32_t hi = word(*f.data, (2 * p + 1) * (N / 8) + j);
            for (int i = 0; i < 8; ++i) {
              w.data[static_cast<size_t>((8 * j + kAwqOrder[i]) * (K / 2) + p)] =
                  u4_pack(nibble(lo, i), nibble(hi, i));
            }
          }
        }
      });
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t j = 0; j < N / 8; ++j) {
          const uint32_t wd = word(*f.zeros, g * (N / 8) + j);
          for (int i = 0; i < 8; ++i) zeros[(8 * j + kAwqOrder[i]) * G + g] = nibble(wd, i);
        }
      }
      for (int64_t g = 0; g < G; ++g)
        for (int64_t n = 0; n < N; ++n) w.scales[n * G + g] = load(*f.scales, g * N + n);
      break;
    case QuantMethod::kGptq:
      // qweight[r, n]'s nibble i is row 8r + i of column n, low nibbles first: as little-endian
      // bytes, exactly the 4 bytes of W[n, 8r .. 8r + 7] in our layout. A transpose of words.
      transpose_words(static_cast<const uint8_t*>(f.data->data), K / 8, N, w.data.data());
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t j = 0; j < N / 8; ++j) {
          const uint32_t wd = word(*f.zeros, g * (N / 8) + j);
          for (int i = 0; i < 8; ++i) {
            zeros[(8 * j + i) * G + g] = static_cast<uint8_t>(nibble(wd, i) + (q.gptq_v2 ? 0 : 1));
          }
        }
      }
      for (int64_t g = 0; g < G; ++g)
        for (int64_t n = 0; n < N; ++n) w.scales[n * G + g] = load(*f.scales, g * N + n);
      break;
    case QuantMethod::kCtPackInt4:
      // weight_packed[n, j]'s nibble i is column 8j + i of row n, low nibbles first: as
      // little-endian bytes, our layout already.
      std::memcpy(w.data.data(), f.data->data, w.data.size());
      if (f.zeros != nullptr) {
        for (int64_t r = 0; r < ceil_div(N, 8); ++r) {
          for (int64_t g = 0; g < G; ++g) {
            const uint32_t wd = word(*f.zeros, r * G + g);
            for (int i = 0; i < 8 && 8 * r + i < N; ++i) zeros[(8 * r + i) * G + g] = nibble(wd, i);
          }
        }
      }
      for (int64_t i = 0; i < N * G; ++i) w.scales[i] = load(*f.scales, i);
      break;
    default:
      return Status::Error("tensor \"" + m + "\": not an int4 method");
  }
  bool all8 = true;
  for (uint8_t z : zeros) all8 = all8 && z == 8;
  if (!all8) w.zeros = std::move(zeros);
  if (f.g_idx != nullptr) {
    bool trivial = true;
    w.g_idx.resize(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) {
      int32_t g;
      std::memcpy(&g, static_cast<const uint8_t*>(f.g_idx->data) + k * 4, 4);
      if (g < 0 || g >= G) {
        return Status::Error(f.g_idx->file + ": tensor \"" + f.g_idx->name + "\": entry " +
                             std::to_string(k) + " is group " + std::to_string(g) +
                             ", expected a group in [0, " + std::to_string(G) + ")");
      }
      w.g_idx[static_cast<size_t>(k)] = g;
      trivial = trivial && g == k / f.group;
    }
    if (trivial) w.g_idx.clear();
  }
  return w;
}

}  // namespace

Weight HostQuantWeight::view() {
  Weight w;
  w.format = format;
  w.n = n;
  w.k = k;
  w.block_n = block_n;
  w.block_k = block_k;
  w.group_size = group_size;
  if (format == WeightFormat::kFp8Block) {
    w.tensor = Tensor(data.data(), DType::F8E4M3, {n, k});
  } else {
    w.tensor = Tensor(data.data(), DType::U4X2, {n, k / 2});
    if (!zeros.empty()) w.zeros = Tensor(zeros.data(), DType::U8, {n, scale_cols});
    if (!g_idx.empty()) w.g_idx = Tensor(g_idx.data(), DType::I32, {k});
    if (!perm.empty()) w.perm = Tensor(perm.data(), DType::I32, {k});
  }
  w.scales = Tensor(scales.data(), DType::F32, {scale_rows, scale_cols});
  return w;
}

std::vector<float> HostQuantWeight::dequantize() {
  std::vector<float> out(static_cast<size_t>(n * k));
  dequantize_rows(view(), 0, n, out.data());
  return out;
}

bool stored_quantized(const std::string& weight_name, const WeightStore& store,
                      const QuantConfig& quant) {
  const std::string m = module_of(weight_name);
  if (m.empty()) return false;
  switch (quant.method) {
    case QuantMethod::kNone:
      return false;
    case QuantMethod::kFp8:
    case QuantMethod::kCtFloatFp8: {
      const TensorInfo* t = store.find(weight_name);
      return t != nullptr && t->dtype == DType::F8E4M3;
    }
    case QuantMethod::kAwq:
    case QuantMethod::kGptq:
      return store.find(m + ".qweight") != nullptr;
    case QuantMethod::kCtPackInt4:
      return store.find(m + ".weight_packed") != nullptr;
  }
  return false;
}

Status check_quantized(const std::string& weight_name, const std::vector<int64_t>& shape,
                       const WeightStore& store, const QuantConfig& quant) {
  Result<Found> found = find(weight_name, shape, store, quant);
  return found.ok() ? Status::Ok() : found.status();
}

Result<HostQuantWeight> read_quantized(const std::string& weight_name,
                                       const std::vector<int64_t>& shape, const WeightStore& store,
                                       const QuantConfig& quant) {
  SYV_ASSIGN_OR_RETURN(Found f, find(weight_name, shape, store, quant));
  if (f.block_n > 0) return read_fp8(f, shape[0], shape[1]);
  return read_int4(f, module_of(weight_name), shape[0], shape[1], quant);
}

int64_t quantized_weight_bytes(const std::vector<int64_t>& shape, const QuantConfig& q,
                               bool has_g_idx) {
  const int64_t N = shape[0], K = shape[1];
  if (q.method == QuantMethod::kFp8 || q.method == QuantMethod::kCtFloatFp8) {
    const int64_t bn = q.fp8_strategy == Fp8ScaleStrategy::kBlock     ? q.block_n
                       : q.fp8_strategy == Fp8ScaleStrategy::kChannel ? 1
                                                                      : N;
    const int64_t bk = q.fp8_strategy == Fp8ScaleStrategy::kBlock ? q.block_k : K;
    return N * K + 4 * ceil_div(N, bn) * ceil_div(K, bk);
  }
  const int64_t G = q.group_size > 0 ? K / q.group_size : 1;
  // data + f32 scales + u8 zeros (asymmetric) + i32 g_idx (act-order)
  return N * K / 2 + 4 * N * G + (q.symmetric ? 0 : N * G) + (has_g_idx ? 4 * K : 0);
}

StoredTensorRole stored_tensor_role(const std::string& name, const TensorInfo& t,
                                    const WeightStore& store, const QuantConfig& q) {
  const StoredTensorRole as_float{StoredRole::kFloat, t.numel()};
  // "<m>" when `name` is "<m>" + one of `suffixes`, else "".
  auto module = [&](std::initializer_list<const char*> suffixes) -> std::string {
    for (const char* suffix : suffixes) {
      if (ends_with(name, suffix)) return name.substr(0, name.size() - std::strlen(suffix));
    }
    return "";
  };
  switch (q.method) {
    case QuantMethod::kNone:
      return as_float;
    case QuantMethod::kFp8:
    case QuantMethod::kCtFloatFp8: {
      if (t.dtype == DType::F8E4M3 && ends_with(name, ".weight")) {
        return {StoredRole::kQuantizedData, t.numel()};
      }
      const std::string m =
          module({q.method == QuantMethod::kFp8 ? ".weight_scale_inv" : ".weight_scale"});
      const TensorInfo* data = m.empty() ? nullptr : store.find(m + ".weight");
      if (data != nullptr && data->dtype == DType::F8E4M3) return {StoredRole::kQuantizedAux, 0};
      return as_float;
    }
    case QuantMethod::kAwq:
    case QuantMethod::kGptq:
    case QuantMethod::kCtPackInt4: {
      const bool ct = q.method == QuantMethod::kCtPackInt4;
      const char* data_suffix = ct ? ".weight_packed" : ".qweight";
      if (t.dtype == DType::I32 && ends_with(name, data_suffix)) {
        return {StoredRole::kQuantizedData, 8 * t.numel()};
      }
      const std::string m =
          ct ? module({".weight_scale", ".weight_shape", ".weight_zero_point", ".weight_g_idx"})
             : module({".qzeros", ".scales", ".g_idx"});
      if (!m.empty() && store.find(m + data_suffix) != nullptr) {
        return {StoredRole::kQuantizedAux, 0};
      }
      return as_float;
    }
  }
  return as_float;
}

std::vector<int64_t> quantized_logical_shape(const TensorInfo& t, const QuantConfig& q) {
  if (t.shape.size() != 2) return {};
  const int64_t r = t.shape[0], c = t.shape[1];
  switch (q.method) {
    case QuantMethod::kGptq:
      return {c, 8 * r};
    case QuantMethod::kAwq:
      return {8 * c, r};
    case QuantMethod::kCtPackInt4:
      return {r, 8 * c};
    default:  // fp8: the weight itself
      return {r, c};
  }
}

std::optional<HostQuantWeight> concat_quantized(std::vector<HostQuantWeight> parts) {
  if (parts.empty()) return std::nullopt;
  if (parts.size() == 1) return std::move(parts[0]);
  const HostQuantWeight& a = parts[0];
  for (const HostQuantWeight& p : parts) {
    if (p.format != a.format || p.k != a.k) return std::nullopt;
    if (p.format == WeightFormat::kFp8Block && p.block_k != a.block_k) return std::nullopt;
    if (p.format == WeightFormat::kInt4Group &&
        (p.group_size != a.group_size || p.g_idx != a.g_idx || p.perm != a.perm ||
         p.scale_cols != a.scale_cols)) {
      return std::nullopt;
    }
  }
  HostQuantWeight out;
  out.format = a.format;
  out.k = a.k;
  out.block_k = a.block_k;
  out.group_size = a.group_size;
  out.g_idx = a.g_idx;
  out.perm = a.perm;
  out.scale_cols = a.scale_cols;
  if (a.format == WeightFormat::kFp8Block) {
    // Tiles stay whole when every part but the last ends on a block_n boundary.
    bool aligned = true;
    for (size_t i = 0; i < parts.size(); ++i) {
      aligned = aligned && parts[i].block_n == a.block_n &&
                (i + 1 == parts.size() || parts[i].n % parts[i].block_n == 0);
    }
    out.block_n = aligned ? a.block_n : 1;
    for (HostQuantWeight& p : parts) {
      if (aligned) {
        out.scales.insert(out.scales.end(), p.scales.begin(), p.scales.end());
      } else {  // one scale row per weight row: the row's tile scales
        for (int64_t r = 0; r < p.n; ++r) {
          const float* s = p.scales.data() + (r / p.block_n) * p.scale_cols;
          out.scales.insert(out.scales.end(), s, s + p.scale_cols);
        }
      }
    }
  } else {
    bool any_zeros = false;
    for (const HostQuantWeight& p : parts) any_zeros = any_zeros || !p.zeros.empty();
    for (HostQuantWeight& p : parts) {
      out.scales.insert(out.scales.end(), p.scales.begin(), p.scales.end());
      if (!any_zeros) continue;
      if (p.zeros.empty()) p.zeros.assign(static_cast<size_t>(p.n * p.scale_cols), 8);
      out.zeros.insert(out.zeros.end(), p.zeros.begin(), p.zeros.end());
    }
  }
  for (HostQuantWeight& p : parts) {
    out.n += p.n;
    out.data.insert(out.data.end(), p.data.begin(), p.data.end());
  }
  out.scale_rows = a.format == WeightFormat::kFp8Block
                       ? static_cast<int64_t>(out.scales.size()) / out.scale_cols
                       : out.n;
  return out;
}

bool permute_act_order(HostQuantWeight& w) {
  if (w.format != WeightFormat::kInt4Group || w.g_idx.empty() || w.group_size <= 0 ||
      w.k % w.group_size != 0 || w.scale_cols != w.k / w.group_size) {
    return false;
  }
  const int64_t K = w.k, N = w.n;
  std::vector<int32_t> perm(static_cast<size_t>(K));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int32_t a, int32_t b) { return w.g_idx[a] < w.g_idx[b]; });
  for (int64_t j = 0; j < K; ++j)
    if (w.g_idx[perm[j]] != j / w.group_size) return false;  // uneven groups
  std::vector<uint8_t> data(w.data.size(), 0);
  ThreadPool::global().parallel_for(N, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* from = w.data.data() + n * (K / 2);
      uint8_t* to = data.data() + n * (K / 2);
      for (int64_t j = 0; j < K; ++j) {
        const int64_t k = perm[j];
        const uint8_t v = (k % 2 == 0) ? u4_low(from[k / 2]) : u4_high(from[k / 2]);
        to[j / 2] |= (j % 2 == 0) ? v : static_cast<uint8_t>(v << 4);
      }
    }
  });
  w.data = std::move(data);
  w.perm = std::move(perm);
  w.g_idx.clear();
  return true;
}

HostQuantWeight slice_rows(const HostQuantWeight& w, int64_t first, int64_t count) {
  SYV_CHECK(first >= 0 && count >= 0 && first + count <= w.n)
      << "slice_rows [" << first << ", +" << count << ") of " << w.n << " rows";
  HostQuantWeight out;
  out.format = w.format;
  out.n = count;
  out.k = w.k;
  out.block_k = w.block_k;
  out.group_size = w.group_size;
  out.g_idx = w.g_idx;
  out.perm = w.perm;
  out.scale_cols = w.scale_cols;
  const int64_t row_bytes = w.format == WeightFormat::kFp8Block ? w.k : w.k / 2;
  out.data.assign(w.data.begin() + first * row_bytes, w.data.begin() + (first + count) * row_bytes);
  const int64_t S = w.scale_cols;
  if (w.format == WeightFormat::kInt4Group) {  // per-row scales and zeros
    out.scales.assign(w.scales.begin() + first * S, w.scales.begin() + (first + count) * S);
    if (!w.zeros.empty())
      out.zeros.assign(w.zeros.begin() + first * S, w.zeros.begin() + (first + count) * S);
    out.scale_rows = count;
    return out;
  }
  // fp8: whole tiles stay tiles when the slice starts on a tile boundary and ends on one (or at
  // the last row); otherwise one scale row per weight row, each its tile's (exact).
  const int64_t bn = w.block_n;
  if (first % bn == 0 && (count % bn == 0 || first + count == w.n)) {
    out.block_n = w.block_n;
    const int64_t r0 = first / bn, r1 = (first + count + bn - 1) / bn;
    out.scales.assign(w.scales.begin() + r0 * S, w.scales.begin() + r1 * S);
  } else {
    out.block_n = 1;
    for (int64_t r = first; r < first + count; ++r) {
      const float* row = w.scales.data() + (r / bn) * S;
      out.scales.insert(out.scales.end(), row, row + S);
    }
  }
  out.scale_rows = static_cast<int64_t>(out.scales.size()) / S;
  return out;
}

}  // namespace syv
