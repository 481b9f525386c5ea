// `syv inspect`: what a model folder holds and what it will cost to serve, without loading it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "backend/available_memory.h"
#include "backend/cuda_choices.h"
#include "cli/command.h"
#include "cli/kv_cache_dtype.h"
#include "cli/memory_plan_cli.h"
#include "cli/preset.h"
#include "cli/step_budget.h"
#include "engine/host_tier_setup.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/prepare_model.h"
#include "model/quant_weights.h"
#include "model/quantize_folder.h"
#include "model/registry.h"

namespace syv::cli {
namespace {

struct Options {
  std::string model_dir;
  // --config: a config.json (or its folder) without weights: its shapes' parameters, device bytes
  // and memory plan, the weights counted as --weights-format would store them.
  std::string config_path;
  std::string weights_format = "bf16";  // bf16, or a `syv quantize --format` (fp8, awq, gptq)
  int32_t group_size = 128;             // awq / gptq: --group-size, as `syv quantize`'s
  bool lm_head = false;                 // gptq: --lm-head, as `syv quantize`'s
  bool json = false;
  PlanArgs plan;              // --gpu-memory-utilization (memory_plan_cli.h)
  double host_cache_gb = -1;  // < 0: what serve would take here (engine/host_tier_setup.h)
  std::string preset_name;    // --preset: the flags `syv serve --preset` would set, and their plan
  Preset preset;              // resolved (cli/preset.h)
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype: the plan's and a KV line's dtype
  std::string state_dtype = "fp32";     // --state-dtype: the plan's (plan.state_dtype)
  // --gemm-tflops: the GEMM rate of the GPU whose step budget the "step budget" line gives (serve
  // measures its own at start-up: cli/step_budget.h); 800 is an H200's measured rate.
  double gemm_tflops = 800;
  bool serve_budget = false;  // --preset without a budget: plan serve's chosen step budget
};

// The step budget `syv serve` chooses on a GPU of `tflops` without --max-batched-tokens, and the
// line that says so ("step budget ...").
struct ServeBudget {
  int32_t tokens = kStepBudgetMin;
  double gflop_per_token = 0;  // 0: not known for this model_type
  std::string line;
};
ServeBudget serve_budget(const ModelConfig& c, double tflops) {
  ServeBudget b;
  Result<double> flops = prefill_flops_per_token(c);
  char text[300];
  if (flops.ok()) {
    b.tokens = step_budget_for(*flops, tflops * 1e12);
    b.gflop_per_token = *flops / 1e9;
    std::snprintf(text, sizeof text,
                  "step budget      %d tokens on a GPU of %.4g TFLOP/s (--gemm-tflops; `syv "
                  "serve` measures its GPU's at start-up): a chunk's linears, %.3g GFLOP a token, "
                  "within %.0f ms; --max-batched-tokens sets it",
                  b.tokens, tflops, b.gflop_per_token, kStepComputeBoundS * 1e3);
  } else {
    std::snprintf(text, sizeof text, "step budget      %d tokens (not chosen: %s)", b.tokens,
                  flops.message().c_str());
  }
  b.line = text;
  return b;
}

// --preset: the plan of the preset's flags as `syv serve` would run them (its defaults where the
// preset sets nothing: utilization 0.90, the step budget serve chooses on a GPU of --gemm-tflops
// (`serve_budget`), 256 sequences), except the plan flags given on this command line.
void plan_for_preset(const Preset& p, bool utilization_given, bool tokens_given, PlanArgs& plan,
                     bool& serve_budget) {
  auto value = [&](const char* flag, double serve_default) {
    const std::string v = preset_value(p, flag);
    return v.empty() ? serve_default : std::stod(v);
  };
  if (!utilization_given) plan.utilization = value("--gpu-memory-utilization", 0.90);
  plan.max_num_seqs = static_cast<int64_t>(value("--max-num-seqs", 256));
  plan.num_speculative_tokens = static_cast<int>(value("--num-speculative-tokens", 0));
  if (!tokens_given) {
    // Without a budget in the preset: serve's choice on a GPU (run() sets it, the config known).
    serve_budget = preset_value(p, "--max-batched-tokens").empty();
    plan.max_batch_tokens = std::max(
        static_cast<int64_t>(value("--max-batched-tokens", kStepBudgetMin)), plan.max_num_seqs);
  }
}

// "--max-num-seqs 512 --max-batched-tokens 16384 ... (why)".
std::string preset_flags(const Preset& p) {
  std::string s;
  for (const PresetFlag& f : p.flags) s += (s.empty() ? "" : " ") + f.flag + " " + f.value;
  return p.why.empty() ? s : s + " (" + p.why + ")";
}

// The host tier's size and the tokens of KV it holds (all of it in pages).
struct HostTierCapacity {
  int64_t bytes = 0;
  int64_t tokens_bf16 = 0, tokens_f32 = 0;
  std::string what;  // "16.00 GB (--host-cache-gb)" / "... (automatic: ...)"
};
HostTierCapacity host_tier_capacity(double gb, int64_t kv_bf16, int64_t kv_f32) {
  HostTierCapacity c;
  if (gb >= 0) {
    c.bytes = static_cast<int64_t>(gb * static_cast<double>(1 << 30));
    c.what = format_bytes(c.bytes) + " (--host-cache-gb)";
  } else {
    const int64_t available = host_available_memory().bytes;
    c.bytes = available < 0 ? 0 : std::min(available / 4, kHostTierAutoCap);
    c.what = available < 0
                 ? std::string("off (free host memory unknown)")
                 : format_bytes(c.bytes) + " (automatic: 1/4 of " + format_bytes(available) +
                       " free host memory, at most " + format_bytes(kHostTierAutoCap) + ")";
  }
  c.tokens_bf16 = kv_bf16 > 0 ? c.bytes / kv_bf16 : 0;
  c.tokens_f32 = kv_f32 > 0 ? c.bytes / kv_f32 : 0;
  return c;
}

// What the checkpoint's tensors hold, counted as the model sees them (stored_tensor_role,
// model/quant_weights.h): logical parameters (a packed int4 word is 8, a scale none), and the bytes
// of the quantized modules (packed data + scales + zeros + g_idx) apart from the float tensors.
struct Holdings {
  int64_t parameters = 0;
  std::map<std::string, int64_t> params_by_dtype;  // "bf16", "f8e4m3", "int4" (packed words)
  int64_t quantized_tensors = 0;                   // modules stored quantized
  int64_t quantized_parameters = 0;
  int64_t quantized_bytes = 0;  // as stored in the files
  int64_t float_bytes = 0;
  std::vector<std::string> quantized_kinds, kept_kinds;  // "q_proj"; "embed_tokens", "norms"
  std::set<std::string> kept_dtypes;
  int64_t routed_expert_parameters = 0;  // "*.mlp.experts.*" outside the MTP head
};

// A mixture-of-experts model's per-token figures: the parameters a token runs through (every
// parameter but the routed experts it is not sent to: top_k of num_experts in each MoE layer; the
// MTP head left out), and the weight bytes a batch-1 decode step reads for it on CUDA (the device
// bytes less the unused experts' share of `expert_bytes`, the routed experts' device bytes, and,
// with untied embeddings, all but one row of embed_tokens).
struct ActivePerToken {
  int64_t parameters = 0, bytes = 0;
};
ActivePerToken active_per_token(const ModelConfig& c, const Holdings& h, int64_t device_bytes,
                                int64_t expert_bytes) {
  const int64_t experts = std::max<int64_t>(c.num_experts, 1);
  const int64_t unused =
      h.routed_expert_parameters - h.routed_expert_parameters * c.num_experts_per_tok / experts;
  ActivePerToken a;
  a.parameters = h.parameters - unused;
  a.bytes = device_bytes - (expert_bytes - expert_bytes * c.num_experts_per_tok / experts);
  if (!c.tie_word_embeddings) a.bytes -= 2 * (c.vocab_size - 1) * c.hidden_size;
  return a;
}

// A MoE model's figures, as --json's "experts" object and as the text lines.
nlohmann::json experts_json(const ModelConfig& c, int64_t routed, const ActivePerToken& a) {
  return {{"num_experts", c.num_experts},
          {"experts_per_token", c.num_experts_per_tok},
          {"routed_expert_parameters", routed},
          {"active_parameters", a.parameters},
          {"active_bytes_per_token", a.bytes}};
}
void print_experts(const ModelConfig& c, int64_t routed, const ActivePerToken& a,
                   int64_t parameters) {
  std::printf("experts          %lld routed, %lld per token; %lld routed-expert parameters\n",
              static_cast<long long>(c.num_experts), static_cast<long long>(c.num_experts_per_tok),
              static_cast<long long>(routed));
  std::printf(
      "active/token     %lld parameters (%.3f B) of %lld; %lld weight bytes (%.2f GB) read "
      "per token by a batch-1 decode step on CUDA\n",
      static_cast<long long>(a.parameters), a.parameters / 1e9, static_cast<long long>(parameters),
      static_cast<long long>(a.bytes), a.bytes / 1e9);
}

// "q_proj" of "model.layers.3.self_attn.q_proj.qweight", "norms" of any "*norm*.weight",
// "A_log" of "model.layers.0.linear_attn.A_log": the module's last name, without the tensor's
// suffix, so that one line covers every layer and expert.
std::string tensor_kind(const std::string& name) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  static const std::set<std::string> kSuffixes = {
      "weight",        "bias",         "qweight",           "qzeros",
      "scales",        "g_idx",        "weight_scale_inv",  "weight_scale",
      "weight_packed", "weight_shape", "weight_zero_point", "weight_g_idx"};
  if (parts.size() > 1 && kSuffixes.count(parts.back()) != 0) parts.pop_back();
  const std::string& last = parts.back();
  if (last.find("norm") != std::string::npos) return "norms";
  return last;
}

void add_kind(std::vector<std::string>& kinds, const std::string& kind) {
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
}

Holdings count_holdings(const WeightStore& store, const QuantConfig& quant) {
  Holdings h;
  for (const std::string& name : store.names()) {
    const TensorInfo* t = store.find(name);
    const StoredTensorRole role = stored_tensor_role(name, *t, store, quant);
    h.parameters += role.parameters;
    if (name.find(".mlp.experts.") != std::string::npos && name.rfind("mtp.", 0) != 0)
      h.routed_expert_parameters += role.parameters;
    switch (role.role) {
      case StoredRole::kQuantizedData:
        ++h.quantized_tensors;
        h.quantized_parameters += role.parameters;
        h.quantized_bytes += static_cast<int64_t>(t->bytes);
        h.params_by_dtype[t->dtype == DType::I32 ? "int4" : std::string(dtype_name(t->dtype))] +=
            role.parameters;
        add_kind(h.quantized_kinds, tensor_kind(name));
        break;
      case StoredRole::kQuantizedAux:
        h.quantized_bytes += static_cast<int64_t>(t->bytes);
        break;
      case StoredRole::kFloat:
        h.float_bytes += static_cast<int64_t>(t->bytes);
        h.params_by_dtype[std::string(dtype_name(t->dtype))] += role.parameters;
        if (quant.quantized()) {
          add_kind(h.kept_kinds, tensor_kind(name));
          h.kept_dtypes.insert(std::string(dtype_name(t->dtype)));
        }
        break;
    }
  }
  return h;
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// "fp8 (e4m3, 128x128 blocks): 14 tensors (q_proj, ...); kept in bf16: embed_tokens, norms".
std::string describe_holdings(const Holdings& h, const QuantConfig& quant) {
  std::string line = describe_quant_config(quant) + ": " + std::to_string(h.quantized_tensors) +
                     " tensors (" + join(h.quantized_kinds) + ")";
  if (!h.kept_kinds.empty()) {
    line += "; kept in " +
            join(std::vector<std::string>(h.kept_dtypes.begin(), h.kept_dtypes.end()), "/") + ": " +
            join(h.kept_kinds);
  }
  return line;
}

// "CUDA scratch     390332428 bytes (0.39 GB) beside the weights: ..." (`syv serve`'s plan counts
// it in its runtime reserve).
void print_scratch(int64_t scratch_bytes, const WeightShape2d& largest) {
  std::printf(
      "CUDA scratch     %lld bytes (%.2f GB) beside the weights: GEMM workspace and "
      "counters %.1f MB",
      static_cast<long long>(scratch_bytes), scratch_bytes / 1e9,
      kCudaConstructionScratchBytes / 1e6);
  if (largest.n > 0) {
    std::printf(
        ", dequantization buffer of the largest quantized weight [%lld, %lld]%s %.1f MB",
        static_cast<long long>(largest.n), static_cast<long long>(largest.k),
        dequant_scratch_bytes(largest) < largest.n * largest.k * 2 ? " (taken in row chunks)" : "",
        dequant_scratch_bytes(largest) / 1e6);
  }
  std::printf("; the memory plan counts it in the runtime reserve, as serve does\n");
}

// --config: no safetensors. The architecture's tensor list (model/prepare_model.h:
// config_weight_specs) gives the parameters; the device bytes are the list in bf16, or as
// `syv quantize --format F` would write and load_model would hold it (quantized_device_bytes).
int run_config_only(const Options& o) {
  namespace fs = std::filesystem;
  std::string dir = o.config_path;
  if (fs::is_regular_file(dir)) dir = fs::path(dir).parent_path().string();
  if (!fs::is_directory(dir)) {
    return fail("--config: \"" + o.config_path + "\" is neither a folder nor a file");
  }
  auto config = load_model_config(dir);
  if (!config.ok()) return fail("--config: " + config.message());
  const ModelConfig& c = *config;
  const ModelArch* arch = find_model_arch(c.model_type);
  if (arch == nullptr) {
    return fail("--config: model_type \"" + c.model_type + "\" is not served by this build");
  }
  if (Status valid = arch->validate(c); !valid.ok()) return fail("--config: " + valid.message());
  if (Status head = check_kv_head_dim(o.plan.kv_dtype, c); !head.ok()) return fail(head.message());
  Result<std::vector<WeightSpec>> specs = config_weight_specs(c);
  if (!specs.ok()) return fail("--config: " + specs.message());
  Holdings held;  // the parameters and routed experts' of the list (no files to hold)
  for (const WeightSpec& w : *specs) {
    held.parameters += w.numel();
    if (w.name.find(".mlp.experts.") != std::string::npos)
      held.routed_expert_parameters += w.numel();
  }
  const int64_t parameters = held.parameters;
  int64_t device_bytes = 2 * parameters;  // bf16
  // CUDA's scratch beside the weights: the dequantization buffer of the largest weight that
  // stays quantized (none in bf16).
  const bool quantized = o.weights_format != "bf16";
  if (quantized && c.is_moe()) {
    return fail("--weights-format " + o.weights_format +
                " with --config: a MoE model's quantized experts stay packed or are dequantized "
                "at load as the CUDA backend decides from the memory they would take "
                "(docs/cuda-backend.md \"Quantized MoE experts\"); quantize a folder (`syv "
                "quantize`) and inspect it with --model");
  }
  const WeightShape2d largest = largest_weight(quantized_load_shapes(
      *arch, c, *specs,
      [&](const WeightSpec& w) { return quantized && quantizes_spec(w, o.lm_head); }, false,
      /*int4=*/o.weights_format == "awq" || o.weights_format == "gptq"));
  const int64_t scratch_bytes = cuda_load_scratch_bytes(dequant_scratch_bytes(largest));
  if (quantized) {
    QuantizeOptions q;
    q.format = o.weights_format == "fp8"   ? QuantizeFormat::kFp8
               : o.weights_format == "awq" ? QuantizeFormat::kAwq
                                           : QuantizeFormat::kGptq;
    q.group_size = o.group_size;
    q.lm_head = o.lm_head;
    Result<int64_t> b = quantized_device_bytes(*specs, q);
    if (!b.ok()) return fail("--weights-format " + o.weights_format + ": " + b.message());
    device_bytes = *b;
  }
  const CacheSpec bf16 = arch->cache_spec(c, DType::BF16);
  const DType kv = o.plan.kv_dtype.value_or(DType::BF16);
  const int64_t kv_bytes = arch->cache_spec(c, kv).kv_bytes_per_token;
  const std::string weights =
      o.weights_format == "bf16" ? std::string("bf16")
      : o.weights_format == "fp8"
          ? std::string("fp8 as `syv quantize --format fp8` writes it (128x128 blocks)")
          : o.weights_format + " int4 as `syv quantize --format " + o.weights_format +
                " --group-size " + std::to_string(o.group_size) + (o.lm_head ? " --lm-head" : "") +
                "` writes it";
  // MoE configs are bf16 here (refused above otherwise): the routed experts' device bytes are
  // twice their parameters.
  const ActivePerToken active =
      active_per_token(c, held, device_bytes, 2 * held.routed_expert_parameters);
  std::string plan_line;
  if (o.plan.utilization > 0) {
    auto plan = describe_memory_plan(o.plan, c, device_bytes, scratch_bytes);
    if (!plan.ok()) return fail(plan.message());
    plan_line = *plan;
  }
  if (o.json) {
    nlohmann::json j;
    j["config"] = o.config_path;
    j["model_type"] = c.model_type;
    j["layers"] = c.num_hidden_layers;
    j["parameters"] = parameters;
    j["weights_format"] = o.weights_format;
    j["weight_bytes_device"] = device_bytes;
    j["cuda_scratch_bytes"] = scratch_bytes;
    j["kv_cache_dtype"] = o.kv_cache_dtype;
    j["kv_bytes_per_token"] = kv_bytes;
    j["kv_bytes_per_token_bf16"] = bf16.kv_bytes_per_token;
    j["state_bytes_per_seq"] = bf16.state_bytes_per_seq;
    if (c.is_moe()) j["experts"] = experts_json(c, held.routed_expert_parameters, active);
    const ServeBudget budget = serve_budget(c, o.gemm_tflops);
    j["step_budget_tokens"] = budget.tokens;
    j["prefill_gflop_per_token"] = budget.gflop_per_token;
    if (!plan_line.empty()) j["memory_plan"] = plan_line;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  const int64_t attn_layers =
      c.layer_types.empty() ? c.num_hidden_layers : c.num_full_attention_layers();
  std::printf("config           %s (no weights: shapes only)\n", o.config_path.c_str());
  std::printf("architecture     %s, model_type \"%s\"\n", arch->description.c_str(),
              c.model_type.c_str());
  std::printf("layers           %lld (%lld full attention)\n",
              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(attn_layers));
  std::printf("parameters       %lld (%.3f B), the checkpoint's tensors without an MTP head\n",
              static_cast<long long>(parameters), parameters / 1e9);
  std::printf("on the device    %lld bytes (%.2f GB): weights %s\n",
              static_cast<long long>(device_bytes), device_bytes / 1e9, weights.c_str());
  print_scratch(scratch_bytes, largest);
  if (c.is_moe()) print_experts(c, held.routed_expert_parameters, active, parameters);
  std::printf("KV per token     %lld bytes bf16", static_cast<long long>(bf16.kv_bytes_per_token));
  if (o.plan.kv_dtype) {
    std::printf(", %lld bytes %s (--kv-cache-dtype %s, scales included)",
                static_cast<long long>(kv_bytes), std::string(dtype_name(kv)).c_str(),
                o.kv_cache_dtype.c_str());
  }
  std::printf("\n");
  if (bf16.state_bytes_per_seq > 0) {
    std::printf("recurrent state  %.1f MB per sequence (f32)\n", bf16.state_bytes_per_seq / 1e6);
  }
  std::printf("%s\n", serve_budget(c, o.gemm_tflops).line.c_str());
  if (!plan_line.empty()) std::printf("%s\n", plan_line.c_str());
  return 0;
}

int run(const Options& o) {
  auto config = load_model_config(o.model_dir);
  if (!config.ok()) return fail("--model: " + config.message());
  auto store = WeightStore::open_dir(o.model_dir);
  if (!store.ok()) return fail("--model: " + store.message());
  const ModelConfig& c = *config;

  const Holdings held = count_holdings(*store, c.quant);
  const int64_t parameters = held.parameters;
  const int64_t attn_layers =
      c.layer_types.empty() ? c.num_hidden_layers : c.num_full_attention_layers();
  // The architecture's own checks and cache spec (model/registry.h): KV bytes per token with the
  // cache in bf16 (CUDA) and f32 (the CPU backend).
  const ModelArch* arch = find_model_arch(c.model_type);
  std::string status = "servable";
  int64_t kv_bf16 = 0, kv_f32 = 0, kv_chosen = 0;  // kv_chosen: --kv-cache-dtype's (not auto)
  if (Status head = check_kv_head_dim(o.plan.kv_dtype, c); !head.ok()) return fail(head.message());
  // What the weights take on a CUDA device (bf16; quantized modules in their packed layouts):
  // the memory plan's figure, with the scratch below. Without a valid architecture: every
  // parameter in bf16.
  int64_t device_bytes = 2 * parameters;
  int64_t expert_bytes = 2 * held.routed_expert_parameters;  // on the device (bf16 by default)
  // CUDA's scratch beside them (cuda_load_scratch_bytes); without a valid architecture, the
  // constructor's only.
  WeightShape2d largest;
  if (arch == nullptr) {
    status = "model_type \"" + c.model_type + "\" is not served by this build";
  } else if (Status valid = arch->validate(c); !valid.ok()) {
    status = valid.message();
  } else {
    kv_bf16 = arch->cache_spec(c, DType::BF16).kv_bytes_per_token;
    kv_f32 = arch->cache_spec(c, DType::F32).kv_bytes_per_token;
    if (o.plan.kv_dtype) kv_chosen = arch->cache_spec(c, *o.plan.kv_dtype).kv_bytes_per_token;
    const auto bf16 = [](DType) { return DType::BF16; };
    if (std::optional<int64_t> b =
            weight_backend_bytes(*arch, c, &*store, bf16, cuda_keeps_moe_experts_quantized())) {
      device_bytes = *b;
      // Experts kept quantized: theirs are the packed bytes, not bf16.
      if (c.is_moe() && cuda_keeps_moe_experts_quantized()) {
        if (std::optional<int64_t> saved = moe_experts_quantized_saving(*arch, c, &*store, bf16))
          expert_bytes -= *saved;
      }
    }
    largest =
        largest_weight(quantized_load_shapes(*arch, c, *store, cuda_keeps_moe_experts_quantized()));
    if (arch->weight_specs != nullptr) {
      int64_t expected = 0;
      for (const WeightSpec& w : arch->weight_specs(c)) expected += w.numel();
      if (expected != parameters)
        status = "weight files hold " + std::to_string(parameters) +
                 " parameters, config implies " + std::to_string(expected);
    }
  }

  const int64_t scratch_bytes = cuda_load_scratch_bytes(dequant_scratch_bytes(largest));
  const ActivePerToken active = active_per_token(c, held, device_bytes, expert_bytes);
  const ServeBudget budget = serve_budget(c, o.gemm_tflops);
  PlanArgs plan_args = o.plan;  // with --preset and no budget: the one serve would choose
  if (o.serve_budget)
    plan_args.max_batch_tokens = std::max<int64_t>(budget.tokens, plan_args.max_num_seqs);
  if (o.json) {
    nlohmann::json j;
    j["model_type"] = c.model_type;
    j["layers"] = c.num_hidden_layers;
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.intermediate_size;
    j["attention_heads"] = c.num_attention_heads;
    j["kv_heads"] = c.num_key_value_heads;
    j["head_dim"] = c.head_dim;
    j["vocab_size"] = c.vocab_size;
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    j["parameters"] = parameters;
    j["parameters_by_dtype"] = held.params_by_dtype;
    j["weight_bytes"] = store->total_bytes();
    j["weight_bytes_device"] = device_bytes;
    j["cuda_scratch_bytes"] = scratch_bytes;
    if (c.is_moe()) j["experts"] = experts_json(c, held.routed_expert_parameters, active);
    nlohmann::json q = {{"method", describe_quant_config(c.quant)}};
    if (c.quant.quantized()) {
      q["quantized_tensors"] = held.quantized_tensors;
      q["quantized_parameters"] = held.quantized_parameters;
      q["quantized_bytes"] = held.quantized_bytes;
      q["float_bytes"] = held.float_bytes;
      q["quantized"] = held.quantized_kinds;
      q["kept"] = held.kept_kinds;
      q["kept_dtypes"] = held.kept_dtypes;
    }
    j["quantization"] = q;
    j["kv_bytes_per_token_bf16"] = kv_bf16;
    j["kv_bytes_per_token_f32"] = kv_f32;
    if (o.plan.kv_dtype) {
      j["kv_cache_dtype"] = o.kv_cache_dtype;
      j["kv_bytes_per_token"] = kv_chosen;
    }
    const HostTierCapacity host = host_tier_capacity(o.host_cache_gb, kv_bf16, kv_f32);
    j["host_tier"] = {
        {"bytes", host.bytes}, {"tokens_bf16", host.tokens_bf16}, {"tokens_f32", host.tokens_f32}};
    j["status"] = status;
    j["step_budget_tokens"] = budget.tokens;
    j["prefill_gflop_per_token"] = budget.gflop_per_token;
    if (!o.preset_name.empty()) {
      nlohmann::json flags = nlohmann::json::object();
      for (const PresetFlag& f : o.preset.flags) flags[f.flag] = f.value;
      j["preset"] = {{"name", o.preset.name}, {"flags", flags}, {"why", o.preset.why}};
    }
    if (o.plan.utilization > 0) {
      auto plan = describe_memory_plan(plan_args, c, device_bytes, scratch_bytes);
      if (plan.ok()) {
        j["memory_plan"] = *plan;
      } else if (o.preset_name.empty()) {
        return fail(plan.message());
      } else {
        j["memory_plan_error"] = plan.message();
      }
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model            %s\n", o.model_dir.c_str());
  std::printf("architecture     %s, model_type \"%s\"\n",
              arch != nullptr ? arch->description.c_str() : "?", c.model_type.c_str());
  std::printf("layers           %lld (%lld full attention)\n",
              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(attn_layers));
  std::printf("hidden           %lld, intermediate %lld, vocab %lld%s\n",
              static_cast<long long>(c.hidden_size), static_cast<long long>(c.intermediate_size),
              static_cast<long long>(c.vocab_size),
              c.tie_word_embeddings ? ", tied embeddings" : "");
  std::printf(
      "attention        %lld query heads, %lld kv heads, head_dim %lld, rope_theta %g, "
      "rms_norm_eps %g\n",
      static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.num_key_value_heads),
      static_cast<long long>(c.head_dim), c.rope_theta, c.rms_norm_eps);
  std::printf("parameters       %lld (%.3f B)\n", static_cast<long long>(parameters),
              parameters / 1e9);
  for (const auto& [dtype, n] : held.params_by_dtype)
    std::printf("  dtype %-6s    %lld parameters\n", dtype.c_str(), static_cast<long long>(n));
  if (c.quant.quantized()) {
    std::printf("quantization     %s\n", describe_holdings(held, c.quant).c_str());
    std::printf(
        "weight bytes     %zu (%.2f GB) in %zu file(s): quantized %lld (packed weights + scales), "
        "float %lld\n",
        store->total_bytes(), store->total_bytes() / 1e9, store->files().size(),
        static_cast<long long>(held.quantized_bytes), static_cast<long long>(held.float_bytes));
  } else {
    std::printf("weight bytes     %zu (%.2f GB) in %zu file(s)\n", store->total_bytes(),
                store->total_bytes() / 1e9, store->files().size());
  }
  const bool table = arch != nullptr && arch->weight_specs != nullptr;
  std::printf("on the device    %lld bytes (%.2f GB) on CUDA (%s)\n",
              static_cast<long long>(device_bytes), device_bytes / 1e9,
              !c.quant.quantized() ? "bf16"
              : table              ? "quantized modules packed, the rest bf16"
                                   : "quantized modules packed, the rest bf16; at most: every "
                                     "tensor of the files, an MTP head included");
  print_scratch(scratch_bytes, largest);
  if (c.is_moe()) print_experts(c, held.routed_expert_parameters, active, parameters);
  std::printf("KV per token     %lld bytes bf16 (CUDA), %lld bytes f32 (CPU backend)",
              static_cast<long long>(kv_bf16), static_cast<long long>(kv_f32));
  if (o.plan.kv_dtype) {
    std::printf(", %lld bytes %s (--kv-cache-dtype %s, scales included)",
                static_cast<long long>(kv_chosen),
                std::string(dtype_name(*o.plan.kv_dtype)).c_str(), o.kv_cache_dtype.c_str());
  }
  std::printf("\n");
  const HostTierCapacity host = host_tier_capacity(o.host_cache_gb, kv_bf16, kv_f32);
  std::printf("host tier        %s: %lld tokens bf16 (CUDA), %lld tokens f32 (CPU backend)%s\n",
              host.what.c_str(), static_cast<long long>(host.tokens_bf16),
              static_cast<long long>(host.tokens_f32),
              c.layer_types.empty() ? "" : "; hybrids give part of it to checkpoints");
  std::printf("max positions    %lld\n", static_cast<long long>(c.max_position_embeddings));
  std::printf("status           %s\n", status.c_str());
  std::printf("%s\n", budget.line.c_str());
  if (!o.preset_name.empty()) {
    std::printf("preset %-9s %s\n", o.preset.name.c_str(), preset_flags(o.preset).c_str());
  }
  if (o.plan.utilization > 0) {
    auto plan = describe_memory_plan(plan_args, c, device_bytes, scratch_bytes);
    // With --preset the plan is extra: without a GPU (and no --gpu-memory-gib) say so.
    if (!plan.ok() && o.preset_name.empty()) return fail(plan.message());
    std::printf("%s\n", plan.ok() ? plan->c_str() : ("memory plan: " + plan.message()).c_str());
  }
  return 0;
}

CommandRegistration reg{
    "inspect", "Describe a model folder: architecture, parameters, dtypes, weight and KV bytes",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.footer(
          "Reads config.json and the safetensors headers only (no weights are loaded), so it is\n"
          "instant even for large models. \"KV per token\" is what one token of context costs in\n"
          "the cache summed over layers (K and V): multiply by the tokens you want to keep "
          "resident.\n\n"
          "A quantized folder (config.json's quantization_config: fp8, awq, gptq,\n"
          "compressed-tensors) counts its logical parameters (an int4 word holds 8, scales and\n"
          "zero points none), names the format and the tensors kept in float, and gives the\n"
          "bytes as stored (packed weights + scales) and as the device keeps them, which is what\n"
          "the memory plan uses.\n\n"
          "A mixture-of-experts model (Qwen3-Next, Qwen3.5-MoE) also gets its active figures: the\n"
          "parameters a token runs through (all but the routed experts it is not sent to; the MTP\n"
          "head left out) and the weight bytes a batch-1 decode step reads for it on CUDA (the\n"
          "device bytes less the unused experts and, untied, all but one embedding row).\n\n"
          "--config reads a config.json alone (no weights): the parameters of its tensor list,\n"
          "their device bytes as bf16 or as `syv quantize` would write them (--weights-format),\n"
          "and the memory plan, e.g. the Qwen3.5-27B shape in int4 on a 24 GiB card:\n"
          "  syv inspect --config tools/bench/configs/qwen3.5-27b --weights-format gptq \\\n"
          "    --gpu-memory-gib 24 --gpu-memory-utilization 0.90 --kv-cache-dtype int4\n\n"
          "Example:\n"
          "  syv inspect --model ~/models/Qwen3-0.6B\n");
      CLI::Option* model = app.add_option(
          "--model", o->model_dir, "A Hugging Face model folder (config.json + *.safetensors).");
      CLI::Option* config =
          app.add_option("--config", o->config_path,
                         "Instead of --model: a config.json (or its folder) without weights, e.g. "
                         "tools/bench/configs/qwen3.5-27b: its parameters, device bytes and "
                         "memory plan (qwen3, qwen3_5_text, qwen3_5_moe_text, qwen3_next)")
              ->excludes(model);
      CLI::Option* weights_format =
          app.add_option("--weights-format", o->weights_format,
                         "With --config: count the weights as bf16 (default) or as `syv quantize "
                         "--format fp8|awq|gptq` would write them (the modules it quantizes "
                         "packed with their scales and zero points, the rest bf16)")
              ->check(CLI::IsMember({"bf16", "fp8", "awq", "gptq"}))
              ->needs(config);
      app.add_flag("--lm-head", o->lm_head,
                   "With --weights-format gptq: lm_head quantized too, as `syv quantize --lm-head`")
          ->needs(weights_format);
      CLI::Option* group_size =
          app.add_option("--group-size", o->group_size,
                         "With --weights-format awq|gptq: input columns per scale (default 128)")
              ->needs(weights_format);
      CLI::Option* seqs = app.add_option("--max-num-seqs", o->plan.max_num_seqs,
                                         "Sequences the plan reserves for (serve's "
                                         "--max-num-seqs, default 256; hybrids hold a recurrent "
                                         "state per sequence)")
                              ->check(CLI::PositiveNumber);
      app.add_flag("--json", o->json, "Print the figures as JSON.");
      CLI::Option* utilization =
          app.add_option("--gpu-memory-utilization", o->plan.utilization,
                         "Also print the KV pool the server would plan at this fraction of GPU "
                         "memory")
              ->check(CLI::Range(0.01, 1.0));
      app.add_option("--gpu-memory-gib", o->plan.gpu_memory_gib,
                     "GPU memory for the plan when this machine has no GPU (GiB)");
      app.add_option("--host-cache-gb", o->host_cache_gb,
                     "Host tier size for its capacity line (default: what `syv serve` would "
                     "take on this machine, a quarter of the free host memory, at most 32 GiB)")
          ->check(CLI::NonNegativeNumber);
      CLI::Option* tokens =
          app.add_option("--max-batch-tokens", o->plan.max_batch_tokens,
                         "Tokens of the largest step, for the activation estimate (default 8192; "
                         "with --preset, the step budget `syv serve` would use)");
      app.add_option("--gemm-tflops", o->gemm_tflops,
                     "GEMM rate (TFLOP/s) of the GPU whose step budget the \"step budget\" line "
                     "gives, and --preset's plan uses, as `syv serve` would choose it there "
                     "(default 800, an H200's measured rate; serve measures its own)")
          ->check(CLI::PositiveNumber);
      CLI::Option* kv_flag = add_kv_cache_dtype_arg(app, o->kv_cache_dtype);
      app.add_option("--state-dtype", o->state_dtype,
                     "Hybrid models: the plan's delta-rule state dtype, as serve's --state-dtype "
                     "(fp32 default, or bf16)")
          ->check(CLI::IsMember({"fp32", "bf16"}));
      app.add_option("--num-checkpoints", o->plan.num_checkpoints,
                     "Hybrid models: checkpoint slots the plan reserves, as serve's "
                     "--num-checkpoints (default 0: --checkpoint-cache-mb worth)")
          ->check(CLI::NonNegativeNumber);
      app.add_flag("--host-embeddings", o->plan.host_embeddings,
                   "Plan as serve's --host-embeddings: the input embedding table in host "
                   "memory (untied models), its device bytes given to the KV pool");
      app.add_option("--checkpoint-cache-mb", o->plan.checkpoint_cache_mb,
                     "Hybrid models: checkpoint budget in MiB when --num-checkpoints is 0, as "
                     "serve's (default 1024)")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--preset", o->preset_name,
                     std::string("Print the flags `syv serve --preset NAME` sets (") +
                         kPresetNames +
                         ") and the memory plan they give (a GPU or --gpu-memory-gib)");
      return [o, utilization, tokens, kv_flag, model, config, group_size, seqs]() -> int {
        if (model->count() == 0 && config->count() == 0) return fail("--model or --config needed");
        if (group_size->count() > 0 && o->weights_format != "awq" && o->weights_format != "gptq") {
          return fail("--group-size applies to --weights-format awq and gptq");
        }
        if (config->count() > 0 && !o->preset_name.empty()) {
          return fail("--preset reads the model folder: use it with --model");
        }
        if (!o->preset_name.empty()) {
          Result<Preset> preset = resolve_preset(o->preset_name, o->model_dir);
          if (!preset.ok()) return fail(preset.message());
          o->preset = *preset;
          const int64_t seqs_given = o->plan.max_num_seqs;
          plan_for_preset(o->preset, utilization->count() > 0, tokens->count() > 0, o->plan,
                          o->serve_budget);
          if (seqs->count() > 0) o->plan.max_num_seqs = seqs_given;
          const std::string kv = preset_value(o->preset, "--kv-cache-dtype");
          if (kv_flag->count() == 0 && !kv.empty()) o->kv_cache_dtype = kv;
        }
        auto kv = parse_kv_cache_dtype(o->kv_cache_dtype);
        if (!kv.ok()) return fail(kv.message());
        o->plan.kv_dtype = *kv;
        o->plan.state_dtype = o->state_dtype == "bf16" ? DType::BF16 : DType::F32;
        return config->count() > 0 ? run_config_only(*o) : run(*o);
      };
    }};

}  // namespace
}  // namespace syv::cli
