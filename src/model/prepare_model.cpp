#include "model/prepare_model.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <utility>

#include "backend/available_memory.h"
#include "backend/cuda_choices.h"
#include "core/log.h"
#include "io/hf_config.h"
#include "io/model_folder.h"
#include "io/quant_config.h"
#include "model/quant_weights.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"
#include "model/qwen3_next.h"
#include "model/weight_spec.h"

namespace syv {

namespace {

// `syv demo-model` marks its output with "syv_demo": true in config.json.
bool is_demo_model(const std::string& dir) {
  std::ifstream in(std::filesystem::path(dir) / "config.json");
  if (!in) return false;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("syv_demo", false) == true;
}

bool is_float_file_dtype(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// a + b * c, saturating at INT64_MAX (configs may name absurd sizes; the check must still refuse).
int64_t add_product(int64_t a, const std::vector<int64_t>& shape, size_t element_bytes) {
  int64_t n = static_cast<int64_t>(element_bytes);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  }
  int64_t sum = 0;
  return __builtin_add_overflow(a, n, &sum) ? INT64_MAX : sum;
}

// " (the cpu backend keeps bf16 weights as f32)", or "" when it keeps the file's dtype.
std::string widening(const Backend& backend) {
  const DType kept = backend.weight_dtype(DType::BF16);
  if (kept == DType::BF16) return "";
  return " (the " + backend.name() + " backend keeps bf16 weights as " +
         std::string(dtype_name(kept)) + ")";
}

// The bytes of a MoE expert's projection (the data tensor of "....mlp.experts.<e>.<gate|up|
// down>_proj", stored quantized) as the loader keeps it quantized, stacked with the layer's other
// experts (model/hybrid_layers.cpp): its canonical bytes, and for fp8 one scale row per weight row
// where its rows do not fill whole scale tiles (concat_quantized); nullopt for any other tensor.
std::optional<int64_t> kept_expert_bytes(const std::string& name, const ModelConfig& config,
                                         const WeightStore& store) {
  // The module's data tensor: "weight" (fp8), "qweight" (awq, gptq), "weight_packed" (ct).
  static const std::regex kExpert(R"((.*\.mlp\.experts\.[0-9]+\.(gate|up|down)_proj)\.[a-z_]+)");
  std::smatch m;
  if (!std::regex_match(name, m, kExpert)) return std::nullopt;
  const int64_t H = config.hidden_size, I = config.moe_intermediate_size;
  const bool down = m[2] == "down";
  const WeightSpec spec{m[1].str() + ".weight",
                        down ? std::vector<int64_t>{H, I} : std::vector<int64_t>{I, H}};
  std::optional<int64_t> bytes = quantized_spec_bytes(spec, &store, config.quant);
  if (!bytes) return std::nullopt;
  const QuantConfig& q = config.quant;
  if (q.method == QuantMethod::kFp8 || q.method == QuantMethod::kCtFloatFp8) {
    // The tile quantized_weight_bytes counts (fp8_strategy as read_quantized takes it).
    const int64_t n = spec.shape[0], k = spec.shape[1];
    const bool block = q.method == QuantMethod::kFp8 || q.fp8_strategy == Fp8ScaleStrategy::kBlock;
    const int64_t bn = block ? q.block_n : q.fp8_strategy == Fp8ScaleStrategy::kChannel ? 1 : n;
    const int64_t bk = block ? q.block_k : k;
    if (bn > 1 && n % bn != 0) {
      *bytes += (n - (n + bn - 1) / bn) * ((k + bk - 1) / bk) * static_cast<int64_t>(sizeof(float));
    }
  }
  return bytes;
}

// "<prefix>" and "<module>" of "<prefix><module>.weight" ("model.layers.0.mlp." and "gate_proj").
struct ModuleName {
  std::string prefix, module;
};
ModuleName split_weight_name(const std::string& weight_name) {
  std::string m = weight_name;
  if (m.size() > 7 && m.compare(m.size() - 7, 7, ".weight") == 0) m.resize(m.size() - 7);
  const size_t dot = m.rfind('.');
  if (dot == std::string::npos) return {"", m};
  return {m.substr(0, dot + 1), m.substr(dot + 1)};
}

// Whether the loaders read this module's values (WeightLoader::read_f32: dequantized) even when
// it is stored quantized: an embedding table (a lookup takes rows), qwen3_5's in_proj_b and
// in_proj_a (stacked on the host as one ba weight) and the MTP head's fc (split in halves).
bool loaded_dequantized(const WeightSpec& spec) {
  const std::string module = split_weight_name(spec.name).module;
  return spec.init == WeightInit::kEmbedding || module == "embed_tokens" || module == "in_proj_a" ||
         module == "in_proj_b" || spec.name == "mtp.fc.weight";
}

// The module of a stored-quantized data tensor ("<m>.qweight" [K/8, N] -> "<m>.weight" [N, K]).
WeightSpec stored_module_spec(const std::string& name, const TensorInfo& data,
                              const QuantConfig& quant) {
  WeightSpec spec{name.substr(0, name.rfind('.')) + ".weight",
                  quantized_logical_shape(data, quant)};
  if (split_weight_name(spec.name).module == "embed_tokens") spec.init = WeightInit::kEmbedding;
  return spec;
}

// The bytes of the module whose stored-quantized data tensor is `name`, where the loader keeps it
// quantized (MoE experts: where the backend keeps them so); nullopt where it loads dequantized.
std::optional<int64_t> kept_quantized_bytes(const std::string& name, const TensorInfo& data,
                                            const ModelConfig& config, const WeightStore& store,
                                            bool moe_experts_quantized) {
  if (name.find(".experts.") != std::string::npos) {
    return moe_experts_quantized ? kept_expert_bytes(name, config, store) : std::nullopt;
  }
  const WeightSpec spec = stored_module_spec(name, data, config.quant);
  if (spec.shape.size() != 2 || loaded_dequantized(spec)) return std::nullopt;
  return quantized_spec_bytes(spec, &store, config.quant);
}

// One weight the loader builds from checkpoint modules: its rows and K, and whether it stays
// quantized (every part stored quantized, none of them a module the loader dequantizes).
struct FusedWeight {
  int64_t rows = 0, k = 0;
  bool quantized = true;
};

// Each spec's rows added to the weight the loader puts them in (keyed by "<prefix><weight>").
std::map<std::string, FusedWeight> fused_weights(
    const ModelArch& arch, const ModelConfig& c, const std::vector<WeightSpec>& specs,
    const std::function<bool(const WeightSpec&)>& quantized, bool moe_experts_quantized) {
  std::map<std::string, FusedWeight> fused;
  auto add = [&](const std::string& key, int64_t rows, int64_t k, bool q) {
    FusedWeight& f = fused[key];
    f.rows += rows;
    f.k = k;
    f.quantized = f.quantized && q;
  };
  const bool gated = arch.needs_hybrid_ops;  // the hybrids' attention: load_gated_attention
  const int64_t value_dim = c.linear_num_value_heads * c.linear_value_head_dim;
  for (const WeightSpec& spec : specs) {
    if (spec.shape.size() != 2) continue;
    const int64_t n = spec.shape[0], k = spec.shape[1];
    const bool q = quantized(spec) && !loaded_dequantized(spec);
    const ModuleName m = split_weight_name(spec.name);
    const size_t experts = spec.name.find(".experts.");
    if (experts != std::string::npos) {  // load_moe: every expert's gate|up rows, its down rows
      const std::string layer = spec.name.substr(0, experts + 9);
      add(layer + (m.module == "down_proj" ? "down" : "gate_up"), n, k, q && moe_experts_quantized);
    } else if (m.module == "gate_proj" || m.module == "up_proj") {
      add(m.prefix + "gate_up", n, k, q);
    } else if (m.module == "q_proj" || m.module == "k_proj" || m.module == "v_proj") {
      // Gated: q_proj [2 Hq D, H] holds each head's query rows, then its gate rows.
      const bool split = gated && m.module == "q_proj";
      add(m.prefix + "qkv", split ? n / 2 : n, k, q);
      if (split) add(m.prefix + "gate", n / 2, k, q);
    } else if (m.module == "in_proj_qkvz") {  // qwen3_next: q|k|v rows and z rows (fused_rows)
      add(m.prefix + "qkv", n - value_dim, k, q);
      add(m.prefix + "z", value_dim, k, q);
    } else {
      add(spec.name, n, k, q);
    }
  }
  // The gate of a gated attention loads as its q|k|v does (one WeightLoader::slices_rows).
  for (auto& [key, f] : fused) {
    const std::string gate = "self_attn.gate";
    if (key.size() > gate.size() && key.compare(key.size() - gate.size(), gate.size(), gate) == 0)
      f.quantized = f.quantized && fused.at(key.substr(0, key.size() - 4) + "qkv").quantized;
  }
  return fused;
}

}  // namespace

std::vector<WeightShape2d> quantized_load_shapes(
    const ModelArch& arch, const ModelConfig& config, const std::vector<WeightSpec>& specs,
    const std::function<bool(const WeightSpec&)>& quantized, bool moe_experts_quantized,
    bool int4) {
  std::vector<WeightShape2d> shapes;
  for (const auto& [key, f] :
       fused_weights(arch, config, specs, quantized, moe_experts_quantized)) {
    if (f.quantized) shapes.push_back({f.rows, f.k, quant_weight_role(key), int4});
  }
  return shapes;
}

std::vector<WeightShape2d> quantized_load_shapes(const ModelArch& arch, const ModelConfig& config,
                                                 const WeightStore& store,
                                                 bool moe_experts_quantized) {
  auto stored = [&](const WeightSpec& spec) {
    return stored_quantized(spec.name, store, config.quant);
  };
  const QuantMethod m = config.quant.method;
  const bool int4 =
      m == QuantMethod::kAwq || m == QuantMethod::kGptq || m == QuantMethod::kCtPackInt4;
  if (arch.weight_specs != nullptr) {
    return quantized_load_shapes(arch, config, arch.weight_specs(config), stored,
                                 moe_experts_quantized, int4);
  }
  // The modules of the files: stored quantized, or 2-D float (which may share a fused weight
  // with quantized ones, making it dense).
  std::vector<WeightSpec> specs;
  for (const std::string& name : store.names()) {
    if (name.rfind("mtp.", 0) == 0 || name.find("visual.") != std::string::npos) continue;
    const TensorInfo* t = store.find(name);
    const StoredRole role = stored_tensor_role(name, *t, store, config.quant).role;
    if (role == StoredRole::kQuantizedData) {
      specs.push_back(stored_module_spec(name, *t, config.quant));
    } else if (role == StoredRole::kFloat && t->shape.size() == 2) {
      specs.push_back({name, t->shape});
    }
  }
  return quantized_load_shapes(arch, config, specs, stored, moe_experts_quantized, int4);
}

int64_t dequant_scratch_bytes(const WeightShape2d& w) {
  return cuda_dequant_scratch_bytes(w.n, w.k, w.role, /*int4_w4a16=*/w.int4);
}

WeightShape2d largest_weight(const std::vector<WeightShape2d>& shapes) {
  WeightShape2d largest;
  auto key = [](const WeightShape2d& w) { return std::pair(dequant_scratch_bytes(w), w.n * w.k); };
  for (const WeightShape2d& s : shapes) {
    if (key(s) > key(largest)) largest = s;
  }
  return largest;
}

std::optional<int64_t> weight_backend_bytes(const ModelArch& arch, const ModelConfig& config,
                                            const WeightStore* store, const Backend& backend) {
  return weight_backend_bytes(
      arch, config, store, [&backend](DType file) { return backend.weight_dtype(file); },
      backend.keeps_moe_experts_quantized());
}

std::optional<int64_t> weight_backend_bytes(const ModelArch& arch, const ModelConfig& config,
                                            const WeightStore* store,
                                            const std::function<DType(DType)>& kept,
                                            bool moe_experts_quantized) {
  int64_t bytes = 0;
  if (arch.weight_specs != nullptr) {
    for (const WeightSpec& spec : arch.weight_specs(config)) {
      if (std::optional<int64_t> q = quantized_spec_bytes(spec, store, config.quant)) {
        bytes = add_product(bytes, {*q}, 1);
        continue;
      }
      const TensorInfo* info = store == nullptr ? nullptr : store->find(spec.name);
      DType file = info == nullptr ? DType::BF16 : info->dtype;
      if (!is_float_file_dtype(file)) file = DType::BF16;  // a quantized tensor loaded dequantized
      bytes = add_product(bytes, spec.shape, dtype_size(kept(file)));
    }
    return bytes;
  }
  if (store == nullptr) return std::nullopt;
  for (const std::string& name : store->names()) {
    const TensorInfo* info = store->find(name);
    const StoredTensorRole role = stored_tensor_role(name, *info, *store, config.quant);
    if (role.role == StoredRole::kQuantizedAux) continue;
    if (role.role == StoredRole::kQuantizedData) {
      if (std::optional<int64_t> b =
              kept_quantized_bytes(name, *info, config, *store, moe_experts_quantized)) {
        bytes = add_product(bytes, {*b}, 1);
        continue;
      }
    }
    const DType file = role.role == StoredRole::kQuantizedData ? DType::BF16 : info->dtype;
    bytes = add_product(bytes, {role.parameters}, dtype_size(kept(file)));
  }
  return bytes;
}

std::optional<int64_t> moe_experts_quantized_saving(const ModelArch& arch,
                                                    const ModelConfig& config,
                                                    const WeightStore* store,
                                                    const std::function<DType(DType)>& kept) {
  const std::optional<int64_t> dequantized = weight_backend_bytes(arch, config, store, kept, false);
  const std::optional<int64_t> quantized = weight_backend_bytes(arch, config, store, kept, true);
  if (!dequantized || !quantized) return std::nullopt;
  return *dequantized - *quantized;
}

Result<std::vector<WeightSpec>> config_weight_specs(const ModelConfig& config) {
  const std::string& type = config.model_type;
  if (type == "qwen3_next") return qwen3_next_weight_specs(config);
  if (type == "qwen3_5_text" || type == "qwen3_5_moe_text") return qwen3_5_weight_specs(config);
  if (type != "qwen3") {
    return Status::Error("model_type \"" + type +
                         "\": the tensor list without a checkpoint is known for qwen3, "
                         "qwen3_5_text, qwen3_5_moe_text and qwen3_next");
  }
  if (config.num_experts > 0) {
    return Status::Error("num_experts = " + std::to_string(config.num_experts) +
                         ": the tensor list without a checkpoint is known for dense qwen3 only");
  }
  return qwen3_weight_specs(config);
}

Result<PreparedModel> prepare_model(const std::string& dir, Backend& backend,
                                    const LoadOptions& options) {
  PreparedModel p;
  p.dir = dir;
  SYV_RETURN_IF_ERROR(check_model_folder(dir));
  SYV_ASSIGN_OR_RETURN(p.config, load_model_config(dir));
  if (is_demo_model(dir)) {
    SYV_LOG(WARN) << dir << " is a syv demo model (`syv demo-model`): random weights, so its "
                  << "output is noise. Point syv at a real Hugging Face Qwen3 folder with "
                  << "--model DIR (e.g. `make serve MODEL=/path/to/Qwen3-0.6B`).";
  }
  p.arch = find_model_arch(p.config.model_type);
  if (p.arch == nullptr) {
    return Status::Error(
        dir + "/config.json: model_type \"" + p.config.model_type +
        "\" is not supported by this build; supported: " + supported_model_types());
  }
  if (p.arch->needs_hybrid_ops && !backend.supports_hybrid_ops()) {
    return Status::Error(dir + "/config.json: model_type \"" + p.config.model_type +
                         "\" is a hybrid (Gated DeltaNet) model, which the " + backend.name() +
                         " backend cannot run yet; use the CPU backend (--device cpu)");
  }
  if (p.config.num_experts > 0 && !backend.supports_moe_ops()) {
    return Status::Error(dir + "/config.json: model_type \"" + p.config.model_type + "\" with " +
                         std::to_string(p.config.num_experts) +
                         " experts is a mixture-of-experts model, which the " + backend.name() +
                         " backend cannot run yet; use the CPU backend (--device cpu)");
  }
  if (p.config.num_experts > 0) {
    const std::string why =
        backend.moe_shape_unsupported(p.config.num_experts, p.config.num_experts_per_tok,
                                      p.config.hidden_size, p.config.moe_intermediate_size);
    if (!why.empty())
      return Status::Error(dir + "/config.json: " + why + "; use the CPU backend (--device cpu)");
  }
  if (p.arch->validate != nullptr) {
    Status valid = p.arch->validate(p.config);
    if (!valid.ok()) return valid.with_context(dir + "/config.json");
  }
  if (options.random_weights && p.config.quant.quantized()) {
    // Random weights are made in the backend's float type: a quantized layout would not be
    // benchmarked, only named.
    return Status::Error(dir + "/config.json: quantization_config (" +
                         describe_quant_config(p.config.quant) +
                         ") with random weights: random weights are float, not quantized. "
                         "Make a quantized folder (syv demo-model --config " +
                         dir +
                         " --out D, then syv quantize --format fp8|awq|gptq --in D --out Q) and "
                         "use it without --random-weights");
  }
  if (options.random_weights) {
    SYV_LOG(INFO) << "weights: random (seed " << options.seed << "), not read from " << dir;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    SYV_ASSIGN_OR_RETURN(WeightStore opened, WeightStore::open_dir(dir));
    p.store = std::move(opened);
    char line[160];
    std::snprintf(line, sizeof line,
                  "weights: %zu safetensors file(s), %zu tensors, %.2f GB; headers checked in "
                  "%.3f s",
                  p.store->files().size(), p.store->names().size(), p.store->total_bytes() / 1e9,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    SYV_LOG(INFO) << line;
  }

  if (p.store && p.config.quant.quantized() && !backend.supports_quantized_weights()) {
    int64_t quantized = 0;
    std::string first;
    for (const std::string& name : p.store->names()) {
      const TensorInfo* t = p.store->find(name);
      if (stored_tensor_role(name, *t, *p.store, p.config.quant).role ==
          StoredRole::kQuantizedData) {
        if (quantized++ == 0) first = name;
      }
    }
    if (quantized > 0) {
      return Status::Error(dir + ": the weights are quantized (" +
                           describe_quant_config(p.config.quant) + ": " +
                           std::to_string(quantized) + " tensors, e.g. \"" + first +
                           "\"), which the " + backend.name() +
                           " backend cannot run yet (no quantized kernels); use the CPU backend "
                           "(--device cpu) or the float folder they were made from");
    }
  }

  const WeightStore* store = p.store ? &*p.store : nullptr;
  if (options.host_embeddings && p.config.tie_word_embeddings) {
    return Status::Error(
        "--host-embeddings: " + dir +
        "/config.json ties lm_head to embed_tokens (tie_word_embeddings: true): the table is "
        "also the output projection, read whole every step, so it stays on the device; drop the "
        "flag for this model");
  }
  const AvailableMemory available = backend.available_memory();
  if (store != nullptr && p.config.is_moe() && p.config.quant.quantized() &&
      backend.chooses_moe_experts_quantized()) {
    // Experts dequantized to bf16 decode fastest above a few tokens a step; kept quantized they
    // take 2-4x less memory (and decode faster at 1-8 tokens). Kept when the dequantized weights
    // would take more than half the memory there is.
    backend.set_moe_experts_quantized(false);
    const std::optional<int64_t> dequantized =
        weight_backend_bytes(*p.arch, p.config, store, backend);
    const bool keep = dequantized && available.bytes > 0 && *dequantized > available.bytes / 2;
    backend.set_moe_experts_quantized(keep);
    SYV_LOG(INFO) << "MoE experts: " << (keep ? "kept quantized" : "dequantized to bf16 at load")
                  << " (dequantized, "
                  << "the weights would take "
                  << (dequantized ? format_bytes(*dequantized) : std::string("an unknown size"))
                  << " of "
                  << (available.bytes < 0 ? std::string("unknown") : format_bytes(available.bytes))
                  << " " << available.where << (keep ? ": more than half" : ": at most half")
                  << "; SYV_QUANT_MOE=" << (keep ? "0" : "1") << " forces the other)";
  }
  if (std::optional<int64_t> bytes = weight_backend_bytes(*p.arch, p.config, store, backend)) {
    p.weight_bytes = *bytes;
    if (options.host_embeddings && backend.host_resident_frees_device_memory()) {
      // the table leaves the device (WeightLoader::keep_embeddings_on_host)
      p.weight_bytes -= p.config.vocab_size * p.config.hidden_size *
                        static_cast<int64_t>(dtype_size(backend.weight_dtype(DType::BF16)));
    }
  }
  const std::string what =
      std::string(options.random_weights ? "the random weights" : "the weights") + " of " + dir +
      widening(backend);
  SYV_RETURN_IF_ERROR(check_weights_fit(p.weight_bytes, available, what));
  SYV_LOG(INFO) << "memory check: weights "
                << (p.weight_bytes < 0 ? std::string("not estimated (random weights of an "
                                                     "architecture without a weight table)")
                                       : format_bytes(p.weight_bytes))
                << ", " << available.where << " "
                << (available.bytes < 0 ? std::string("unknown") : format_bytes(available.bytes));
  // Every tensor the architecture lists, against the headers (after the memory check: a folder
  // too large for the machine is refused for that, whatever else is wrong with it).
  if (p.store && p.arch->weight_specs != nullptr) {
    for (const WeightSpec& spec : p.arch->weight_specs(p.config)) {
      SYV_RETURN_IF_ERROR(check_spec_in_store(spec, *p.store, p.config.quant));
    }
  }
  return p;
}

}  // namespace syv
