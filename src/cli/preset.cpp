#include "cli/preset.h"

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/hybrid_layers.h"

namespace syv::cli {
namespace {

// interactive: speculation the folder allows. An MTP head (config.json's mtp_num_hidden_layers
// = 1 and mtp.fc.weight among the tensors) drafts better than prompt lookup; any model can run
// ngram.
Result<Preset> interactive(const std::string& model_dir) {
  Preset p{"interactive", {{"--max-num-seqs", "16"}, {"--max-graph-batch", "16"}}, ""};
  SYV_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  bool mtp = false;
  std::string no_head = "the folder has no MTP head";
  if (config.mtp_num_hidden_layers > 0) {
    SYV_ASSIGN_OR_RETURN(WeightStore store, WeightStore::open_dir(model_dir));
    const Status head = check_mtp_config(config, &store);
    mtp = head.ok();
    if (!mtp) no_head = "config.json names an MTP head that cannot run: " + head.message();
  }
  if (mtp) {
    p.flags.push_back({"--speculative-method", "mtp"});
    p.flags.push_back({"--num-speculative-tokens", "2"});
    p.why = "mtp: the folder has an MTP head";
  } else {
    p.flags.push_back({"--speculative-method", "ngram"});
    p.flags.push_back({"--num-speculative-tokens", "4"});
    p.why = "ngram: " + no_head;
  }
  return p;
}

}  // namespace

Result<Preset> resolve_preset(const std::string& name, const std::string& model_dir) {
  if (name == "interactive") return interactive(model_dir);
  if (name == "long") {
    // The pool goes to few sequences; max context = min(the model's maximum, the pool), as the
    // engine sets it when --max-model-len is not given. fp8 KV holds ~2x bf16's tokens in the
    // same memory for a small quality cost (docs/performance.md "quantized KV cache quality").
    return Preset{"long",
                  {{"--max-num-seqs", "4"},
                   {"--gpu-memory-utilization", "0.95"},
                   {"--kv-cache-dtype", "fp8"}},
                  "fp8 KV: about twice the tokens of bf16"};
  }
  if (name == "throughput") {
    return Preset{"throughput",
                  {{"--max-num-seqs", "512"},
                   {"--max-batched-tokens", "16384"},
                   {"--max-graph-batch", "512"},
                   {"--max-waiting", "1024"}},
                  ""};
  }
  return Status::Error("--preset: unknown preset \"" + name + "\" (choices: " + kPresetNames + ")");
}

Result<std::string> apply_preset(CLI::App& app, const Preset& preset) {
  std::string line = "preset " + preset.name + ":";
  std::string given;
  for (const PresetFlag& f : preset.flags) {
    CLI::Option* opt = app.get_option_no_throw(f.flag);
    if (opt == nullptr) continue;
    if (opt->count() > 0) {
      given += " " + f.flag + " " + opt->as<std::string>();
      continue;
    }
    try {
      opt->add_result(f.value);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return Status::Error("--preset " + preset.name + ": " + f.flag + " " + f.value + ": " +
                           e.what());
    }
    line += " " + f.flag + " " + f.value;
  }
  if (!preset.why.empty()) line += " (" + preset.why + ")";
  if (!given.empty()) line += "; given on the command line:" + given;
  return line;
}

std::string preset_value(const Preset& preset, const std::string& flag) {
  for (const PresetFlag& f : preset.flags)
    if (f.flag == flag) return f.value;
  return "";
}

}  // namespace syv::cli
