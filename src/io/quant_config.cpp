// quantization_config -> QuantConfig. Field names and values follow the tools that write them:
// transformers FineGrainedFP8Config (fp8), AutoAWQ (awq), AutoGPTQ / GPTQModel (gptq) and
// compressed-tensors' QuantizationConfig (compressed-tensors); WAVE2-SPECS part C.
#include "io/quant_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "io/json_describe.h"

namespace syv {

namespace {

using json = nlohmann::json;

std::string show(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 60; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c >= 0x7f || c == '"') ? '?' : static_cast<char>(c);
  }
  return out + (s.size() > 60 ? "...\"" : "\"");
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Typed reads of one object; messages name `<source>: field "<prefix><key>"`.
class QFields {
 public:
  QFields(const json& obj, const std::string& source, std::string prefix)
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  const json* find(const std::string& key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string where(const std::string& key) const {
    return source_ + ": field \"" + prefix_ + key + "\"";
  }
  Status error(const std::string& key, const std::string& expected) const {
    const json* v = find(key);
    return Status::Error(where(key) + ": expected " + expected + ", found " +
                         (v ? describe_json_value(*v, show) : std::string("nothing (missing)")));
  }
  // A value that parses but is not supported: `field "bits": 8 is not supported (...)`.
  Status unsupported(const std::string& key, const std::string& why) const {
    const json* v = find(key);
    return Status::Error(where(key) + ": " + (v ? describe_json_value(*v, show) : "null") +
                         " is not supported (" + why + ")");
  }
  Result<std::string> string(const std::string& key, const char* def) const {
    const json* v = find(key);
    if (!v) {
      if (def) return std::string(def);
      return error(key, "a string");
    }
    if (!v->is_string()) return error(key, "a string");
    return v->get<std::string>();
  }
  Result<bool> boolean(const std::string& key, bool def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_boolean()) return error(key, "true or false");
    return v->get<bool>();
  }
  Result<int64_t> integer(const std::string& key) const {
    const json* v = find(key);
    if (!v || !v->is_number_integer()) return error(key, "an integer");
    return v->get<int64_t>();
  }
  Result<std::vector<std::string>> strings(const std::string& key) const {
    std::vector<std::string> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) return error(key, "a list of strings or null");
    for (const json& e : *v) {
      if (!e.is_string()) return error(key, "a list of strings or null");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  // int4 group size: a positive integer, or -1 (one group over all of K) -> 0.
  Result<int32_t> group_size(const std::string& key) const {
    SYV_ASSIGN_OR_RETURN(int64_t g, integer(key));
    if (g == -1) return 0;
    if (g <= 0 || g > (1 << 20)) return error(key, "a positive group size or -1");
    return static_cast<int32_t>(g);
  }
  Status require_bits4(const std::string& key) const {
    SYV_ASSIGN_OR_RETURN(int64_t bits, integer(key));
    if (bits != 4) return unsupported(key, "syv reads 4-bit weights");
    return Status::Ok();
  }

 private:
  const json& obj_;
  const std::string& source_;
  std::string prefix_;
};

Status parse_fp8(const QFields& f, QuantConfig* q) {
  q->method = QuantMethod::kFp8;
  SYV_ASSIGN_OR_RETURN(std::string fmt, f.string("fmt", "e4m3"));
  if (fmt != "e4m3") return f.unsupported("fmt", "syv reads \"e4m3\" fp8 weights");
  SYV_ASSIGN_OR_RETURN(std::string act, f.string("activation_scheme", "dynamic"));
  if (act != "dynamic") {
    return f.unsupported("activation_scheme",
                         "syv quantizes activations dynamically or not at all");
  }
  const json* b = f.find("weight_block_size");
  if (!b) return f.error("weight_block_size", "[block_n, block_k], e.g. [128, 128]");
  if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() ||
      !(*b)[1].is_number_integer() || (*b)[0].get<int64_t>() <= 0 || (*b)[1].get<int64_t>() <= 0 ||
      (*b)[0].get<int64_t>() > 65536 || (*b)[1].get<int64_t>() > 65536) {
    return f.error("weight_block_size", "[block_n, block_k] of positive integers");
  }
  q->block_n = static_cast<int32_t>((*b)[0].get<int64_t>());
  q->block_k = static_cast<int32_t>((*b)[1].get<int64_t>());
  SYV_ASSIGN_OR_RETURN(q->not_converted, f.strings("modules_to_not_convert"));
  return Status::Ok();
}

Status parse_awq(const QFields& f, QuantConfig* q) {
  q->method = QuantMethod::kAwq;
  SYV_RETURN_IF_ERROR(f.require_bits4("bits"));
  SYV_ASSIGN_OR_RETURN(q->group_size, f.group_size("group_size"));
  SYV_ASSIGN_OR_RETURN(std::string version, f.string("version", "gemm"));
  if (lower(version) != "gemm") {
    return f.unsupported("version", "syv reads the AutoAWQ \"gemm\" packing");
  }
  SYV_ASSIGN_OR_RETURN(bool zero_point, f.boolean("zero_point", true));
  if (!zero_point) return f.unsupported("zero_point", "AWQ GEMM checkpoints carry zero points");
  q->symmetric = false;
  SYV_ASSIGN_OR_RETURN(q->not_converted, f.strings("modules_to_not_convert"));
  return Status::Ok();
}

Status parse_gptq(const QFields& f, QuantConfig* q) {
  q->method = QuantMethod::kGptq;
  SYV_RETURN_IF_ERROR(f.require_bits4("bits"));
  SYV_ASSIGN_OR_RETURN(q->group_size, f.group_size("group_size"));
  SYV_ASSIGN_OR_RETURN(q->symmetric, f.boolean("sym", true));
  SYV_ASSIGN_OR_RETURN(q->act_order, f.boolean("desc_act", false));
  SYV_ASSIGN_OR_RETURN(std::string format, f.string("checkpoint_format", "gptq"));
  if (format != "gptq" && format != "gptq_v2") {
    return f.unsupported("checkpoint_format", "syv reads \"gptq\" and \"gptq_v2\"");
  }
  q->gptq_v2 = format == "gptq_v2";
  SYV_ASSIGN_OR_RETURN(std::string pack, f.string("pack_dtype", "int32"));
  if (pack != "int32") return f.unsupported("pack_dtype", "syv reads int32-packed GPTQ weights");
  SYV_ASSIGN_OR_RETURN(q->not_converted, f.strings("modules_to_not_convert"));
  return Status::Ok();
}

Status parse_compressed_tensors(const QFields& f, const json& root, const std::string& source,
                                QuantConfig* q) {
  SYV_ASSIGN_OR_RETURN(std::string format, f.string("format", nullptr));
  if (format != "pack-quantized" && format != "float-quantized") {
    return f.unsupported("format", "syv reads \"pack-quantized\" and \"float-quantized\"");
  }
  SYV_ASSIGN_OR_RETURN(std::string status, f.string("quantization_status", "compressed"));
  if (status != "compressed") {
    return f.unsupported("quantization_status", "syv reads \"compressed\" checkpoints");
  }
  if (const json* kv = f.find("kv_cache_scheme")) {
    (void)kv;
    return f.unsupported("kv_cache_scheme", "quantized KV cache scales are not read yet");
  }
  if (const json* sp = f.find("sparsity_config"); sp && !sp->empty()) {
    return f.unsupported("sparsity_config", "sparse checkpoints are not read");
  }
  const json* groups = f.find("config_groups");
  if (!groups || !groups->is_object() || groups->empty()) {
    return f.error("config_groups", "an object of one or more quantization groups");
  }
  bool first = true;
  for (const auto& [name, group] : groups->items()) {
    const std::string gp = "quantization_config.config_groups." + name + ".";
    if (!group.is_object()) return QFields(root, source, gp).error("", "an object");
    const QFields g(group, source, gp);
    SYV_ASSIGN_OR_RETURN(std::string gformat, g.string("format", format.c_str()));
    if (gformat != format) return g.unsupported("format", "one format for all groups");
    if (g.find("output_activations")) {
      return g.unsupported("output_activations", "output activations are not quantized");
    }
    const json* w = g.find("weights");
    if (!w || !w->is_object()) return g.error("weights", "an object");
    const QFields wf(*w, source, gp + "weights.");
    SYV_ASSIGN_OR_RETURN(int64_t bits, wf.integer("num_bits"));
    SYV_ASSIGN_OR_RETURN(std::string type, wf.string("type", nullptr));
    SYV_ASSIGN_OR_RETURN(std::string strategy, wf.string("strategy", nullptr));
    SYV_ASSIGN_OR_RETURN(bool symmetric, wf.boolean("symmetric", true));
    SYV_ASSIGN_OR_RETURN(bool dynamic, wf.boolean("dynamic", false));
    if (dynamic) return wf.unsupported("dynamic", "weights are quantized ahead of time");
    QuantConfig one;
    if (format == "pack-quantized") {
      one.method = QuantMethod::kCtPackInt4;
      if (type != "int") return wf.unsupported("type", "pack-quantized weights are \"int\"");
      if (bits != 4) return wf.unsupported("num_bits", "syv reads 4-bit weights");
      if (strategy == "group") {
        SYV_ASSIGN_OR_RETURN(one.group_size, wf.group_size("group_size"));
        if (one.group_size == 0) return wf.error("group_size", "a positive group size");
      } else if (strategy != "channel") {
        return wf.unsupported("strategy", "pack-quantized weights: \"group\" or \"channel\"");
      }
      one.symmetric = symmetric;
      if (const json* a = wf.find("actorder")) {
        if (!a->is_string() && !a->is_boolean()) return wf.error("actorder", "a string or null");
        one.act_order = a->is_string() ? a->get<std::string>() == "group" : a->get<bool>();
        if (a->is_string() && a->get<std::string>() != "group" &&
            a->get<std::string>() != "weight") {
          return wf.unsupported("actorder", "\"group\", \"weight\" or null");
        }
      }
      if (g.find("input_activations")) {
        return g.unsupported("input_activations", "pack-quantized weights run with float inputs");
      }
    } else {
      one.method = QuantMethod::kCtFloatFp8;
      if (type != "float") return wf.unsupported("type", "float-quantized weights are \"float\"");
      if (bits != 8) return wf.unsupported("num_bits", "syv reads 8-bit (e4m3) float weights");
      if (!symmetric) return wf.unsupported("symmetric", "fp8 weights are symmetric");
      if (strategy == "tensor") {
        one.fp8_strategy = Fp8ScaleStrategy::kTensor;
      } else if (strategy == "channel") {
        one.fp8_strategy = Fp8ScaleStrategy::kChannel;
      } else if (strategy == "block") {
        one.fp8_strategy = Fp8ScaleStrategy::kBlock;
        const json* b = wf.find("block_structure");
        if (!b || !b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() ||
            !(*b)[1].is_number_integer() || (*b)[0].get<int64_t>() <= 0 ||
            (*b)[1].get<int64_t>() <= 0 || (*b)[0].get<int64_t>() > 65536 ||
            (*b)[1].get<int64_t>() > 65536) {
          return wf.error("block_structure", "[block_n, block_k] of positive integers");
        }
        one.block_n = static_cast<int32_t>((*b)[0].get<int64_t>());
        one.block_k = static_cast<int32_t>((*b)[1].get<int64_t>());
      } else {
        return wf.unsupported("strategy",
                              "float-quantized weights: \"tensor\", \"channel\" or "
                              "\"block\"");
      }
      if (const json* a = g.find("input_activations")) {
        if (!a->is_object()) return g.error("input_activations", "an object or null");
        const QFields af(*a, source, gp + "input_activations.");
        SYV_ASSIGN_OR_RETURN(bool adyn, af.boolean("dynamic", false));
        if (!adyn) {
          return af.unsupported("dynamic",
                                "static activation scales are not read; syv keeps "
                                "activations in floating point");
        }
      }
    }
    if (!first && (one.method != q->method || one.group_size != q->group_size ||
                   one.symmetric != q->symmetric || one.act_order != q->act_order ||
                   one.fp8_strategy != q->fp8_strategy || one.block_n != q->block_n ||
                   one.block_k != q->block_k)) {
      return f.unsupported("config_groups", "syv reads checkpoints whose groups share one scheme");
    }
    one.not_converted = q->not_converted;
    *q = one;
    first = false;
  }
  SYV_ASSIGN_OR_RETURN(q->not_converted, f.strings("ignore"));
  return Status::Ok();
}

}  // namespace

std::string describe_quant_config(const QuantConfig& q) {
  const std::string groups =
      q.group_size > 0 ? "groups of " + std::to_string(q.group_size) : "one group per row";
  switch (q.method) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kFp8:
      return "fp8 (e4m3, " + std::to_string(q.block_n) + "x" + std::to_string(q.block_k) +
             " blocks)";
    case QuantMethod::kAwq:
      return "awq (int4 gemm, " + groups + ", zero points)";
    case QuantMethod::kGptq:
      return std::string("gptq") + (q.gptq_v2 ? " v2" : "") + " (int4, " + groups +
             (q.symmetric ? ", symmetric" : ", zero points") + (q.act_order ? ", act-order" : "") +
             ")";
    case QuantMethod::kCtPackInt4:
      return "compressed-tensors pack-quantized (int4, " + groups +
             (q.symmetric ? ", symmetric" : ", zero points") + (q.act_order ? ", act-order" : "") +
             ")";
    case QuantMethod::kCtFloatFp8:
      return std::string("compressed-tensors float-quantized (e4m3, ") +
             (q.fp8_strategy == Fp8ScaleStrategy::kTensor ? "per-tensor scale"
              : q.fp8_strategy == Fp8ScaleStrategy::kChannel
                  ? "per-channel scales"
                  : std::to_string(q.block_n) + "x" + std::to_string(q.block_k) + " blocks") +
             ")";
  }
  return "?";
}

Result<QuantConfig> parse_quant_config(const json& q, const std::string& source) {
  if (!q.is_object()) {
    return Status::Error(source + ": field \"quantization_config\": expected an object, found " +
                         describe_json_value(q, show));
  }
  const QFields f(q, source, "quantization_config.");
  SYV_ASSIGN_OR_RETURN(std::string method, f.string("quant_method", nullptr));
  QuantConfig out;
  if (method == "fp8") {
    SYV_RETURN_IF_ERROR(parse_fp8(f, &out));
  } else if (method == "awq") {
    SYV_RETURN_IF_ERROR(parse_awq(f, &out));
  } else if (method == "gptq") {
    SYV_RETURN_IF_ERROR(parse_gptq(f, &out));
  } else if (method == "compressed-tensors") {
    SYV_RETURN_IF_ERROR(parse_compressed_tensors(f, q, source, &out));
  } else {
    return f.unsupported("quant_method",
                         "supported: \"fp8\", \"awq\", \"gptq\", \"compressed-tensors\"");
  }
  return out;
}

Result<QuantConfig> parse_quant_config_text(const std::string& text, const std::string& source) {
  json q = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (q.is_discarded()) return Status::Error(source + ": quantization_config is not valid JSON");
  return parse_quant_config(q, source);
}

}  // namespace syv
