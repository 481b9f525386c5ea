// config.json -> ModelConfig. Defaults follow the transformers config classes (Qwen3Config,
// Qwen3_5TextConfig, Qwen3_5MoeTextConfig, Qwen3NextConfig) except where noted in
// docs/model-folder.md; every field that is present is type- and range-checked.
#include "io/hf_config.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "io/json_describe.h"
#include "io/model_folder.h"
#include "io/quant_config.h"

namespace syv {

namespace {

using json = nlohmann::json;

// A JSON string as config messages show it: quoted, at most 60 bytes, control / non-ASCII bytes
// and quotes as '?'.
std::string show_config_string(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 60; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c >= 0x7f || c == '"') ? '?' : static_cast<char>(c);
  }
  return out + (s.size() > 60 ? "...\"" : "\"");
}

std::string describe(const json& v) {
  return describe_json_value(v, show_config_string);
}

// Reads typed fields of one JSON object; messages read
// `config.json: field "text_config.hidden_size": expected a positive integer, found "abc"`.
class Fields {
 public:
  Fields(const json& obj, std::string source, std::string prefix)
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // The value, or nullptr when absent or null (HF writes null for "use the default").
  const json* find(const std::string& key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  Status error(const std::string& key, const std::string& expected, const json* found) const {
    return Status::Error(source_ + ": field \"" + prefix_ + key + "\": expected " + expected +
                         ", found " +
                         (found ? describe(*found) : std::string("nothing (missing)")));
  }
  Status missing(const std::string& key, const std::string& expected) const {
    return Status::Error(source_ + ": missing field \"" + prefix_ + key + "\" (expected " +
                         expected + ")");
  }

  // An integer >= min_value; `def` when absent, or an error when there is no default.
  Result<int64_t> integer(const std::string& key, std::optional<int64_t> def,
                          int64_t min_value = 1) const {
    std::string expected = min_value == 1   ? "a positive integer"
                           : min_value == 0 ? "a non-negative integer"
                                            : "an integer >= " + std::to_string(min_value);
    const json* v = find(key);
    if (!v) {
      if (def) return *def;
      return missing(key, expected);
    }
    std::optional<int64_t> x;
    if (v->is_number_integer()) {
      x = v->get<int64_t>();
    } else if (v->is_number_float()) {  // 4.0 is accepted; 4.5 is not
      double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)
        x = static_cast<int64_t>(d);
    }
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) x.reset();
    if (!x || *x < min_value) return error(key, expected, v);
    return *x;
  }

  Result<double> number(const std::string& key, double def, double lo, double hi,
                        const std::string& expected) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_number()) return error(key, expected, v);
    double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) return error(key, expected, v);
    return d;
  }

  Result<bool> boolean(const std::string& key, bool def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_boolean()) return error(key, "true or false", v);
    return v->get<bool>();
  }

  Result<std::string> string(const std::string& key, std::optional<std::string> def) const {
    const json* v = find(key);
    if (!v) {
      if (def) return *def;
      return missing(key, "a string");
    }
    if (!v->is_string()) return error(key, "a string", v);
    return v->get<std::string>();
  }

  // An int or a list of ints (eos_token_id). Empty when absent.
  Result<std::vector<int32_t>> token_ids(const std::string& key) const {
    const json* v = find(key);
    std::vector<int32_t> out;
    if (!v) return out;
    auto one = [&](const json& x) -> bool {
      if (!x.is_number_integer()) return false;
      int64_t i = x.get<int64_t>();
      if (i < 0 || i > INT32_MAX) return false;
      out.push_back(static_cast<int32_t>(i));
      return true;
    };
    const std::string expected = "a token id or a list of token ids";
    if (v->is_array()) {
      for (const json& x : *v) {
        if (!one(x)) return error(key, expected, &x);
      }
    } else if (!one(*v)) {
      return error(key, expected, v);
    }
    return out;
  }

  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }
  const json& obj() const { return obj_; }

 private:
  const json& obj_;
  std::string source_;
  std::string prefix_;
};

Status check_positive(const Fields& f, const std::string& key, int64_t value) {
  if (value <= 0) {
    json v = value;
    return f.error(key, "a positive integer", &v);
  }
  return Status::Ok();
}

// rope_theta / rope_parameters / rope_scaling. Only the default (and M-RoPE, which is plain RoPE
// for text-only input) rotation is implemented.
Status parse_rope(const Fields& f, ModelConfig* c) {
  SYV_ASSIGN_OR_RETURN(c->rope_theta,
                       f.number("rope_theta", 10000.0, 1e-9, 1e300, "a positive number"));
  SYV_ASSIGN_OR_RETURN(
      c->partial_rotary_factor,
      f.number("partial_rotary_factor", c->partial_rotary_factor, 1e-9, 1.0, "a number in (0, 1]"));
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json* v = f.find(key);
    if (!v) continue;
    if (!v->is_object()) return f.error(key, "an object or null", v);
    Fields r(*v, f.source(), f.prefix() + key + ".");
    std::string type = "default";
    for (const char* tkey : {"rope_type", "type"}) {
      if (r.has(tkey)) {
        SYV_ASSIGN_OR_RETURN(type, r.string(tkey, std::nullopt));
        break;
      }
    }
    if (type != "default" && type != "mrope") {
      bool plain = !type.empty() && type.size() <= 32;
      for (char ch : type)
        plain = plain && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-');
      return Status::Error(f.source() + ": field \"" + f.prefix() + key + "\": rope_scaling type " +
                           (plain ? type : describe(json(type))) +
                           " is not supported yet (syv implements \"default\" RoPE only)");
    }
    SYV_ASSIGN_OR_RETURN(c->rope_theta,
                         r.number("rope_theta", c->rope_theta, 1e-9, 1e300, "a positive number"));
    SYV_ASSIGN_OR_RETURN(c->partial_rotary_factor,
                         r.number("partial_rotary_factor", c->partial_rotary_factor, 1e-9, 1.0,
                                  "a number in (0, 1]"));
    if (const json* ms = r.find("mrope_section")) {
      if (!ms->is_array()) return r.error("mrope_section", "a list of integers", ms);
      c->mrope_section.clear();
      for (const json& x : *ms) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0) {
          return r.error("mrope_section", "a list of non-negative integers", &x);
        }
        c->mrope_section.push_back(x.get<int64_t>());
      }
    }
  }
  return Status::Ok();
}

Status parse_layer_types(const Fields& f, ModelConfig* c, bool hybrid) {
  c->layer_types.clear();
  const json* lt = f.find("layer_types");
  if (lt) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c->num_hidden_layers) {
      return f.error("layer_types",
                     "a list of " + std::to_string(c->num_hidden_layers) + " layer types", lt);
    }
    for (const json& x : *lt) {
      if (x.is_string() && x.get_ref<const std::string&>() == "full_attention") {
        c->layer_types.push_back(LayerType::kFullAttention);
      } else if (hybrid && x.is_string() && x.get_ref<const std::string&>() == "linear_attention") {
        c->layer_types.push_back(LayerType::kLinearAttention);
      } else {
        return f.error("layer_types",
                       hybrid ? "\"full_attention\" or \"linear_attention\" entries"
                              : "\"full_attention\" entries (sliding-window attention is not "
                                "supported)",
                       &x);
      }
    }
    return Status::Ok();
  }
  if (!hybrid) {
    c->layer_types.assign(static_cast<size_t>(c->num_hidden_layers), LayerType::kFullAttention);
    return Status::Ok();
  }
  SYV_ASSIGN_OR_RETURN(int64_t interval, f.integer("full_attention_interval", 4));
  for (int64_t i = 0; i < c->num_hidden_layers; ++i) {
    c->layer_types.push_back((i + 1) % interval == 0 ? LayerType::kFullAttention
                                                     : LayerType::kLinearAttention);
  }
  return Status::Ok();
}

Status parse_moe(const Fields& f, ModelConfig* c, int64_t def_experts, int64_t def_topk) {
  SYV_ASSIGN_OR_RETURN(c->num_experts, f.integer("num_experts", def_experts));
  SYV_ASSIGN_OR_RETURN(c->num_experts_per_tok, f.integer("num_experts_per_tok", def_topk));
  if (c->num_experts_per_tok > c->num_experts) {
    const json* v = f.find("num_experts_per_tok");
    return f.error("num_experts_per_tok",
                   "at most num_experts (" + std::to_string(c->num_experts) + ")", v);
  }
  SYV_ASSIGN_OR_RETURN(c->moe_intermediate_size, f.integer("moe_intermediate_size", 512));
  SYV_ASSIGN_OR_RETURN(c->shared_expert_intermediate_size,
                       f.integer("shared_expert_intermediate_size", 512, 0));
  SYV_ASSIGN_OR_RETURN(c->norm_topk_prob, f.boolean("norm_topk_prob", true));
  SYV_ASSIGN_OR_RETURN(c->decoder_sparse_step, f.integer("decoder_sparse_step", 1));
  c->mlp_only_layers.clear();
  if (const json* v = f.find("mlp_only_layers")) {
    if (!v->is_array()) return f.error("mlp_only_layers", "a list of layer indices", v);
    for (const json& x : *v) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 ||
          x.get<int64_t>() >= c->num_hidden_layers) {
        return f.error("mlp_only_layers",
                       "layer indices in [0, " + std::to_string(c->num_hidden_layers) + ")", &x);
      }
      c->mlp_only_layers.push_back(x.get<int64_t>());
    }
  }
  return Status::Ok();
}

// The text-model fields shared by every family. `f` is the object holding them (the root, or
// text_config for qwen3_5 / qwen3_5_moe).
Status parse_text_fields(const Fields& f, bool moe, ModelConfig* c) {
  const bool hybrid = c->family != ModelFamily::kQwen3;
  SYV_ASSIGN_OR_RETURN(c->vocab_size, f.integer("vocab_size", std::nullopt));
  SYV_ASSIGN_OR_RETURN(c->hidden_size, f.integer("hidden_size", std::nullopt));
  // A MoE model's dense MLP width is only used by mlp_only_layers / decoder_sparse_step > 1.
  SYV_ASSIGN_OR_RETURN(
      c->intermediate_size,
      f.integer("intermediate_size", moe ? std::optional<int64_t>(0) : std::nullopt, moe ? 0 : 1));
  SYV_ASSIGN_OR_RETURN(c->num_hidden_layers, f.integer("num_hidden_layers", std::nullopt));
  if (c->num_hidden_layers > 100000) {
    return f.error("num_hidden_layers", "at most 100000", f.find("num_hidden_layers"));
  }
  SYV_ASSIGN_OR_RETURN(c->num_attention_heads, f.integer("num_attention_heads", std::nullopt));
  SYV_ASSIGN_OR_RETURN(
      c->num_key_value_heads,
      f.integer("num_key_value_heads",
                hybrid ? std::nullopt : std::optional<int64_t>(c->num_attention_heads)));
  if (c->num_attention_heads % c->num_key_value_heads != 0) {
    return f.error(
        "num_key_value_heads",
        "a divisor of num_attention_heads (" + std::to_string(c->num_attention_heads) + ")",
        f.find("num_key_value_heads"));
  }
  if (hybrid) {
    SYV_ASSIGN_OR_RETURN(c->head_dim, f.integer("head_dim", 256));
  } else if (f.has("head_dim")) {
    SYV_ASSIGN_OR_RETURN(c->head_dim, f.integer("head_dim", std::nullopt));
  } else {
    if (c->hidden_size % c->num_attention_heads != 0) {
      return f.missing("head_dim", "a positive integer; hidden_size " +
                                       std::to_string(c->hidden_size) +
                                       " is not divisible by num_attention_heads " +
                                       std::to_string(c->num_attention_heads));
    }
    c->head_dim = c->hidden_size / c->num_attention_heads;
  }
  SYV_ASSIGN_OR_RETURN(c->rms_norm_eps,
                       f.number("rms_norm_eps", 1e-6, 1e-30, 1.0, "a number in (0, 1]"));
  SYV_ASSIGN_OR_RETURN(c->max_position_embeddings, f.integer("max_position_embeddings", 32768));
  SYV_ASSIGN_OR_RETURN(c->tie_word_embeddings, f.boolean("tie_word_embeddings", false));
  SYV_ASSIGN_OR_RETURN(c->attention_bias, f.boolean("attention_bias", false));
  SYV_ASSIGN_OR_RETURN(std::string act, f.string("hidden_act", std::string("silu")));
  if (act != "silu") {
    json v = act;
    return f.error("hidden_act", "\"silu\"", &v);
  }
  if (f.has("dtype")) {
    SYV_ASSIGN_OR_RETURN(c->torch_dtype, f.string("dtype", std::nullopt));
  } else {
    SYV_ASSIGN_OR_RETURN(c->torch_dtype, f.string("torch_dtype", std::string("bfloat16")));
  }
  c->partial_rotary_factor = hybrid ? 0.25 : 1.0;
  SYV_RETURN_IF_ERROR(parse_rope(f, c));
  double rot = static_cast<double>(c->head_dim) * c->partial_rotary_factor;
  if (rot != std::floor(rot) || static_cast<int64_t>(rot) % 2 != 0 || rot < 2) {
    json v = c->partial_rotary_factor;
    return f.error(
        "partial_rotary_factor",
        "a factor giving an even number of rotary lanes of head_dim " + std::to_string(c->head_dim),
        &v);
  }
  if (!hybrid) {
    SYV_ASSIGN_OR_RETURN(bool sliding, f.boolean("use_sliding_window", false));
    if (sliding) {
      json v = true;
      return f.error("use_sliding_window", "false (sliding-window attention is not supported)", &v);
    }
  }
  SYV_RETURN_IF_ERROR(parse_layer_types(f, c, hybrid));

  if (hybrid) {
    SYV_ASSIGN_OR_RETURN(c->linear_num_key_heads, f.integer("linear_num_key_heads", 16));
    SYV_ASSIGN_OR_RETURN(c->linear_num_value_heads, f.integer("linear_num_value_heads", 32));
    SYV_ASSIGN_OR_RETURN(c->linear_key_head_dim, f.integer("linear_key_head_dim", 128));
    SYV_ASSIGN_OR_RETURN(c->linear_value_head_dim, f.integer("linear_value_head_dim", 128));
    SYV_ASSIGN_OR_RETURN(c->linear_conv_kernel_dim, f.integer("linear_conv_kernel_dim", 4));
    if (c->linear_num_value_heads % c->linear_num_key_heads != 0) {
      return f.error(
          "linear_num_value_heads",
          "a multiple of linear_num_key_heads (" + std::to_string(c->linear_num_key_heads) + ")",
          f.find("linear_num_value_heads"));
    }
    SYV_ASSIGN_OR_RETURN(c->mtp_num_hidden_layers, f.integer("mtp_num_hidden_layers", 0, 0));
  }
  if (moe) {
    const bool next = c->family == ModelFamily::kQwen3Next;
    SYV_RETURN_IF_ERROR(parse_moe(f, c, next ? 512 : 256, next ? 10 : 8));
  }
  bool any_dense_layer = false;
  for (int64_t i = 0; i < c->num_hidden_layers; ++i) any_dense_layer |= !c->layer_is_moe(i);
  if (any_dense_layer)
    SYV_RETURN_IF_ERROR(check_positive(f, "intermediate_size", c->intermediate_size));

  SYV_ASSIGN_OR_RETURN(c->eos_token_ids, f.token_ids("eos_token_id"));
  if (const json* b = f.find("bos_token_id")) {
    if (!b->is_number_integer() || b->get<int64_t>() < 0 || b->get<int64_t>() > INT32_MAX) {
      return f.error("bos_token_id", "a token id", b);
    }
    c->bos_token_id = static_cast<int32_t>(b->get<int64_t>());
  }
  return Status::Ok();
}

const char* kSupported =
    "supported: \"qwen3\", \"qwen3_5\", \"qwen3_5_text\", \"qwen3_5_moe\", \"qwen3_5_moe_text\", "
    "\"qwen3_next\"";

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Error(path + ": read error");
  return ss.str();
}

Result<ModelConfig> parse_impl(const std::string& json_text, const std::string& source) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Status::Error(source + ": not valid JSON");
  if (!root.is_object()) {
    return Status::Error(source + ": expected a JSON object, found " + describe(root));
  }
  Fields top(root, source, "");
  ModelConfig c;
  if (!top.has("model_type")) {
    return Status::Error(source + ": missing field \"model_type\" (" + kSupported + ")");
  }
  SYV_ASSIGN_OR_RETURN(c.model_type, top.string("model_type", std::nullopt));
  const std::string& mt = c.model_type;
  bool moe = false;
  bool nested = false;
  if (mt == "qwen3") {
    c.family = ModelFamily::kQwen3;
  } else if (mt == "qwen3_5_text" || mt == "qwen3_5_moe_text") {
    c.family = ModelFamily::kQwen3_5;
    moe = mt == "qwen3_5_moe_text";
  } else if (mt == "qwen3_5" || mt == "qwen3_5_moe") {
    c.family = ModelFamily::kQwen3_5;
    moe = mt == "qwen3_5_moe";
    nested = true;
  } else if (mt == "qwen3_next") {
    c.family = ModelFamily::kQwen3Next;
    moe = true;
  } else {
    return Status::Error(source + ": model_type " + describe(root["model_type"]) +
                         " is not supported (" + kSupported + ")");
  }
  // Pre-quantized checkpoints say so here (io/quant_config.h): the method and layout are parsed
  // now, the tensors are read by model/quant_weights.h.
  const json* q = top.find("quantization_config");
  if (const json* tc0 = nested ? top.find("text_config") : nullptr;
      !q && tc0 && tc0->is_object() && tc0->contains("quantization_config") &&
      !tc0->at("quantization_config").is_null()) {
    q = &tc0->at("quantization_config");
  }
  if (q) {
    SYV_ASSIGN_OR_RETURN(c.quant, parse_quant_config(*q, source));
  }
  if (!nested) {
    SYV_RETURN_IF_ERROR(parse_text_fields(top, moe, &c));
    return c;
  }
  const json* tc = top.find("text_config");
  if (!tc) return top.missing("text_config", "an object with the text model's fields");
  if (!tc->is_object()) return top.error("text_config", "an object", tc);
  Fields text(*tc, source, "text_config.");
  if (text.has("model_type")) {
    SYV_ASSIGN_OR_RETURN(std::string inner, text.string("model_type", std::nullopt));
    const std::string want = mt + "_text";
    if (inner != want) {
      json v = inner;
      return text.error("model_type", "\"" + want + "\"", &v);
    }
  }
  SYV_RETURN_IF_ERROR(parse_text_fields(text, moe, &c));
  // The top-level config owns these for the ForConditionalGeneration checkpoint.
  if (top.has("tie_word_embeddings")) {
    SYV_ASSIGN_OR_RETURN(c.tie_word_embeddings, top.boolean("tie_word_embeddings", false));
  }
  if (c.eos_token_ids.empty()) {
    SYV_ASSIGN_OR_RETURN(c.eos_token_ids, top.token_ids("eos_token_id"));
  }
  if (!text.has("dtype") && !text.has("torch_dtype")) {
    if (top.has("dtype")) {
      SYV_ASSIGN_OR_RETURN(c.torch_dtype, top.string("dtype", std::nullopt));
    } else if (top.has("torch_dtype")) {
      SYV_ASSIGN_OR_RETURN(c.torch_dtype, top.string("torch_dtype", std::nullopt));
    }
  }
  return c;
}

}  // namespace

Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source) {
  try {
    return parse_impl(json_text, source);
  } catch (const std::exception& e) {  // defensive: nlohmann accessors are type-checked above
    return Status::Error(source + ": " + e.what());
  }
}

Result<ModelConfig> load_model_config(const std::string& dir) {
  SYV_RETURN_IF_ERROR(check_model_folder(dir));  // GGUF, a Hugging Face cache root, a file
  const std::string path = dir + "/config.json";
  SYV_ASSIGN_OR_RETURN(std::string text, read_file(path));
  SYV_ASSIGN_OR_RETURN(ModelConfig c, parse_model_config(text, path));
  const std::string gen_path = dir + "/generation_config.json";
  std::ifstream probe(gen_path);
  if (!probe) return c;
  probe.close();
  SYV_ASSIGN_OR_RETURN(std::string gen_text, read_file(gen_path));
  json gen = json::parse(gen_text, nullptr, false);
  if (gen.is_discarded()) return Status::Error(gen_path + ": not valid JSON");
  if (!gen.is_object()) {
    return Status::Error(gen_path + ": expected a JSON object, found " + describe(gen));
  }
  Fields g(gen, gen_path, "");
  SYV_ASSIGN_OR_RETURN(auto eos, g.token_ids("eos_token_id"));
  if (!eos.empty()) c.eos_token_ids = std::move(eos);
  if (const json* b = g.find("bos_token_id")) {
    if (!b->is_number_integer() || b->get<int64_t>() < 0 || b->get<int64_t>() > INT32_MAX) {
      return g.error("bos_token_id", "a token id", b);
    }
    c.bos_token_id = static_cast<int32_t>(b->get<int64_t>());
  }
  return c;
}

}  // namespace syv
