// quantize_folder(): reads each safetensors file of the input folder (memory-mapped), packs the
// quantized modules with model/quant_pack.h and writes the file again under the same name.
#include "model/quantize_folder.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/log.h"
#include "core/progress_log.h"
#include "io/quant_config.h"
#include "io/safetensors.h"
#include "model/quant_pack.h"
#include "model/quant_weights.h"
#include "model/weight_spec.h"

namespace syv {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(path.string() + ": cannot open");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Error(path.string() + ": not a JSON object");
  return j;
}

Status write_json(const fs::path& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) return Status::Error(path.string() + ": write failed");
  return Status::Ok();
}

json quantization_config(const QuantizeOptions& o, const std::vector<std::string>& kept) {
  switch (o.format) {
    case QuantizeFormat::kFp8:  // transformers FineGrainedFP8Config.to_dict() as Qwen ships it
      return {{"activation_scheme", "dynamic"},
              {"fmt", "e4m3"},
              {"quant_method", "fp8"},
              {"weight_block_size", {o.block, o.block}},
              {"modules_to_not_convert", kept}};
    case QuantizeFormat::kAwq:  // AutoAWQ's export
      return {
          {"bits", 4},         {"group_size", o.group_size}, {"quant_method", "awq"},
          {"version", "gemm"}, {"zero_point", true},         {"modules_to_not_convert", nullptr}};
    case QuantizeFormat::kGptq: {  // AutoGPTQ / optimum's layout fields
      json c = {{"bits", 4},           {"group_size", o.group_size}, {"desc_act", false},
                {"sym", true},         {"quant_method", "gptq"},     {"checkpoint_format", "gptq"},
                {"lm_head", o.lm_head}};
      if (o.gptq != nullptr) c["damp_percent"] = o.gptq_damp;  // calibrated (AutoGPTQ's field)
      if (o.gptq != nullptr && o.gptq_act_order) {
        c["desc_act"] = true;
        c["static_groups"] = true;
      }
      return c;
    }
  }
  return json::object();
}

Status check_packable(const QuantizeOptions& o, const TensorInfo& t) {
  const int64_t N = t.shape[0], K = t.shape[1];
  std::string why;
  if (o.format == QuantizeFormat::kAwq || o.format == QuantizeFormat::kGptq) {
    if (N % 8 != 0) why = "N must be a multiple of 8 (int4 words pack 8 values)";
    if (K % 8 != 0) why = "K must be a multiple of 8 (int4 words pack 8 values)";
    if (K % o.group_size != 0) {
      why = "--group-size " + std::to_string(o.group_size) +
            " does not divide K = " + std::to_string(K);
    }
  }
  if (why.empty()) return Status::Ok();
  return Status::Error(t.file + ": tensor \"" + t.name + "\" " + shape_string(t.shape) +
                       " cannot be quantized: " + why);
}

// --lm-head: gptq only, and a model with an lm_head.weight (untied embeddings).
Status check_lm_head_option(const QuantizeOptions& o, bool has_lm_head, const std::string& where) {
  if (!o.lm_head) return Status::Ok();
  if (o.format != QuantizeFormat::kGptq) {
    return Status::Error("--lm-head: gptq only (GPTQModel's \"lm_head\": true)");
  }
  if (!has_lm_head) {
    return Status::Error("--lm-head: " + where +
                         ": the model has no lm_head.weight (tie_word_embeddings: lm_head is the "
                         "embedding table, which stays in float)");
  }
  return Status::Ok();
}

}  // namespace

bool quantize_tensor_name(const std::string& name, bool lm_head) {
  if (lm_head && name == "lm_head.weight") return true;
  if (name.find(".layers.") == std::string::npos || !ends_with(name, ".weight")) return false;
  const std::string stem = name.substr(0, name.size() - 7);
  const std::string module = stem.substr(stem.rfind('.') + 1);
  if (module == "in_proj_a" || module == "in_proj_b" || module == "in_proj_ba") return false;
  return ends_with(module, "_proj") || module.rfind("in_proj_", 0) == 0;
}

bool quantizes_spec(const WeightSpec& spec, bool lm_head) {
  return spec.shape.size() == 2 && spec.init != WeightInit::kEmbedding &&
         quantize_tensor_name(spec.name, lm_head);
}

Result<int64_t> quantized_device_bytes(const std::vector<WeightSpec>& specs,
                                       const QuantizeOptions& o) {
  if (o.group_size <= 0 || o.block <= 0) {
    return Status::Error("--group-size must be positive, found " + std::to_string(o.group_size));
  }
  bool has_lm_head = false;
  for (const WeightSpec& spec : specs) has_lm_head |= spec.name == "lm_head.weight";
  SYV_RETURN_IF_ERROR(check_lm_head_option(o, has_lm_head, "config.json"));
  // The quantization_config quantize_folder writes, as load_model parses it.
  SYV_ASSIGN_OR_RETURN(QuantConfig quant,
                       parse_quant_config(quantization_config(o, {}), "syv quantize"));
  int64_t bytes = 0;
  for (const WeightSpec& spec : specs) {
    if (quantizes_spec(spec, o.lm_head)) {
      TensorInfo t;
      t.name = spec.name;
      t.shape = spec.shape;
      t.file = "config.json";
      SYV_RETURN_IF_ERROR(check_packable(o, t));
      bytes += quantized_weight_bytes(spec.shape, quant, /*has_g_idx=*/false);
    } else {
      bytes += 2 * spec.numel();
    }
  }
  return bytes;
}

Status quantize_folder(const QuantizeOptions& o) {
  if (o.group_size <= 0 || o.block <= 0) {
    return Status::Error("--group-size must be positive, found " + std::to_string(o.group_size));
  }
  const fs::path in(o.in_dir), out(o.out_dir);
  std::error_code ec;
  if (fs::equivalent(in, out, ec)) return Status::Error("--out must differ from --in");
  SYV_ASSIGN_OR_RETURN(json config, read_json(in / "config.json"));
  if (config.contains("quantization_config") ||
      (config.contains("text_config") && config["text_config"].is_object() &&
       config["text_config"].contains("quantization_config"))) {
    return Status::Error((in / "config.json").string() +
                         ": the model is already quantized (quantization_config is present)");
  }
  SYV_ASSIGN_OR_RETURN(WeightStore store, WeightStore::open_dir(o.in_dir));
  SYV_RETURN_IF_ERROR(check_lm_head_option(o, store.find("lm_head.weight") != nullptr,
                                           (in / "config.json").string()));
  // Every check before anything is written.
  std::vector<std::string> kept;
  for (const std::string& name : store.names()) {
    const TensorInfo& t = *store.find(name);
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16) {
      return Status::Error(t.file + ": tensor \"" + name + "\" has dtype " +
                           std::string(dtype_name(t.dtype)) + "; syv quantize reads float models");
    }
    if (t.shape.size() == 2 && quantize_tensor_name(name, o.lm_head)) {
      SYV_RETURN_IF_ERROR(check_packable(o, t));
    } else if (t.shape.size() == 2 && ends_with(name, ".weight") &&
               name.find("embed_tokens") == std::string::npos) {
      kept.push_back(name.substr(0, name.size() - 7));
    }
  }
  fs::create_directories(out, ec);
  if (ec) return Status::Error(out.string() + ": cannot create: " + ec.message());
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string f = e.path().filename().string();
    if (ends_with(f, ".safetensors") || f == "model.safetensors.index.json") fs::remove(e.path());
  }
  json weight_map = json::object();
  // A progress line about every 10 s (a large model's tensors take minutes by GPTQ).
  int64_t to_quantize = 0, quantized = 0;
  for (const std::string& name : store.names()) {
    const TensorInfo& t = *store.find(name);
    to_quantize += t.shape.size() == 2 && quantize_tensor_name(name, o.lm_head);
  }
  ProgressLog progress;
  int64_t calibrated = 0;                 // tensors quantized with a GPTQ factor
  std::vector<std::string> uncalibrated;  // quantized to nearest though factors were given
  for (const std::string& file : store.files()) {
    std::vector<PackedTensor> packed;  // owns the quantized bytes of this file
    std::vector<TensorToWrite> tensors;
    std::vector<std::pair<std::string, size_t>> names;  // (name, index into packed or SIZE_MAX)
    for (const std::string& name : store.names()) {
      const TensorInfo& t = *store.find(name);
      if (t.file != file) continue;
      if (!(t.shape.size() == 2 && quantize_tensor_name(name, o.lm_head))) {
        if (t.shape.size() == 3 && name.find(".experts.") != std::string::npos) {
          SYV_LOG(WARN) << "quantize: " << name
                        << " holds every expert in one 3-D tensor: kept as it is (syv quantize "
                           "quantizes 2-D projections; a checkpoint with one tensor per expert, "
                           "as transformers saves them, gets its experts quantized)";
        }
        tensors.push_back({name, t.dtype, t.shape, t.data});
        continue;
      }
      std::vector<float> w(static_cast<size_t>(t.numel()));
      convert_to_f32(t.dtype, t.data, w.data(), w.size());
      const int64_t N = t.shape[0], K = t.shape[1];
      const GptqFactor* factor = nullptr;
      if (o.gptq != nullptr && o.format != QuantizeFormat::kFp8) {
        auto it = o.gptq->find(name);
        if (it != o.gptq->end()) {
          factor = it->second.get();
          ++calibrated;
        } else {
          uncalibrated.push_back(name);
        }
      }
      std::vector<PackedTensor> parts =
          o.format == QuantizeFormat::kFp8   ? pack_fp8_block(w.data(), N, K, o.block, o.block)
          : o.format == QuantizeFormat::kAwq ? pack_awq(w.data(), N, K, o.group_size, factor)
                                             : pack_gptq(w.data(), N, K, o.group_size, factor);
      progress.report("quantize: tensor", ++quantized, to_quantize);
      const std::string module = name.substr(0, name.size() - 7);
      for (PackedTensor& p : parts) {
        p.suffix = module + p.suffix;  // now the full name
        packed.push_back(std::move(p));
      }
    }
    for (const PackedTensor& p : packed)
      tensors.push_back({p.suffix, p.dtype, p.shape, p.bytes.data()});
    const fs::path target = out / fs::path(file).filename();
    SYV_RETURN_IF_ERROR(write_safetensors(target.string(), tensors));
    for (const TensorToWrite& t : tensors) weight_map[t.name] = target.filename().string();
    SYV_LOG(INFO) << "quantize: wrote " << target.string() << " (" << tensors.size() << " tensors, "
                  << packed.size() << " of them quantized)";
  }
  if (o.gptq != nullptr && o.format != QuantizeFormat::kFp8) {
    std::string names;
    for (size_t i = 0; i < uncalibrated.size() && i < 4; ++i) names += " " + uncalibrated[i];
    SYV_LOG(INFO) << "quantize: " << calibrated << " tensor(s) by GPTQ over the calibration inputs"
                  << (uncalibrated.empty()
                          ? std::string()
                          : ", " + std::to_string(uncalibrated.size()) +
                                " rounded to nearest (no linear() saw their inputs:" + names +
                                (uncalibrated.size() > 4 ? " ..." : "") + ")");
  }
  if (fs::exists(in / "model.safetensors.index.json")) {
    SYV_ASSIGN_OR_RETURN(json index, read_json(in / "model.safetensors.index.json"));
    index["weight_map"] = weight_map;
    if (index.contains("metadata") && index["metadata"].is_object()) {
      size_t total = 0;
      for (const auto& e : fs::directory_iterator(out)) {
        if (ends_with(e.path().filename().string(), ".safetensors"))
          total += fs::file_size(e.path());
      }
      index["metadata"]["total_size"] = total;
    }
    SYV_RETURN_IF_ERROR(write_json(out / "model.safetensors.index.json", index));
  }
  config["quantization_config"] = quantization_config(o, kept);
  SYV_RETURN_IF_ERROR(write_json(out / "config.json", config));
  for (const auto& e : fs::directory_iterator(in)) {
    const std::string f = e.path().filename().string();
    if (!e.is_regular_file() || f == "config.json" || f == "model.safetensors.index.json" ||
        ends_with(f, ".safetensors")) {
      continue;
    }
    fs::copy_file(e.path(), out / f, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::Error((out / f).string() + ": cannot copy: " + ec.message());
  }
  return Status::Ok();
}

}  // namespace syv
