// `syv demo-model`: writes a tiny random-weight Qwen3 with the real Qwen3 vocabulary and tokenizer,
// so `make serve` works on a fresh checkout without downloading a model. Its output is noise.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "io/safetensors.h"
#include "model/qwen3.h"

namespace syv::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string tokenizer_dir;
  std::string out_dir;
  uint64_t seed = 0;
};

ModelConfig demo_config() {
  ModelConfig c;
  c.family = ModelFamily::kQwen3;
  c.model_type = "qwen3";
  c.vocab_size = 151936;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 32;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.max_position_embeddings = 40960;
  c.tie_word_embeddings = true;
  return c;
}

Status write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return Status::Error(path.string() + ": cannot write");
  return Status::Ok();
}

int run(const Options& o) {
  const fs::path tok(o.tokenizer_dir);
  if (!fs::is_regular_file(tok / "tokenizer.json"))
    return fail("--tokenizer: " + (tok / "tokenizer.json").string() + " not found",
                "run tools/setup/fetch-tokenizer.sh, or point --tokenizer at a Qwen3 model folder");
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return fail("--out: cannot create \"" + o.out_dir + "\": " + ec.message());
  const fs::path out(o.out_dir);

  const ModelConfig c = demo_config();
  nlohmann::json config = {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"model_type", "qwen3"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"attention_bias", false},
      {"tie_word_embeddings", true},
      {"torch_dtype", "bfloat16"},
      {"bos_token_id", 151643},
      {"eos_token_id", 151645},
      {"syv_demo", true},
  };
  nlohmann::json generation = {{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}};
  if (Status s = write_json(out / "config.json", config); !s.ok())
    return fail("--out: " + s.message());
  if (Status s = write_json(out / "generation_config.json", generation); !s.ok())
    return fail("--out: " + s.message());

  // Random bf16 weights drawn exactly as LoadOptions::random_weights draws them.
  std::vector<WeightSpec> specs = qwen3_weight_specs(c);
  std::vector<std::vector<uint16_t>> data(specs.size());
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<float> values(static_cast<size_t>(specs[i].numel()));
    fill_random_weight(specs[i], o.seed, i, values.data());
    data[i].resize(values.size());
    for (size_t k = 0; k < values.size(); ++k) data[i][k] = f32_to_bf16(values[k]);
    tensors.push_back({specs[i].name, DType::BF16, specs[i].shape, data[i].data()});
  }
  if (Status s =
          write_safetensors((out / "model.safetensors").string(), tensors, {{"format", "pt"}});
      !s.ok())
    return fail("--out: " + s.message());

  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    if (!fs::exists(tok / name)) {
      std::fprintf(stderr, "note: %s has no %s; not copied\n", o.tokenizer_dir.c_str(), name);
      continue;
    }
    fs::copy_file(tok / name, out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return fail("--out: copying " + (tok / name).string() + ": " + ec.message());
  }
  std::fprintf(stderr,
               "wrote the demo model (random weights: its output is noise) to %s\n"
               "try: syv generate --model %s --prompt 'Hello' --max-tokens 8\n",
               o.out_dir.c_str(), o.out_dir.c_str());
  return 0;
}

CommandRegistration reg{
    "demo-model",
    "Write a tiny random-weight Qwen3 (real tokenizer) for trying syv without a download",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.footer(
          "The demo model has the real Qwen3 vocabulary (151936) and tokenizer but only 2 layers "
          "of\n"
          "width 64 with random bf16 weights: every request path works, the text is noise. It is\n"
          "marked \"syv_demo\": true in config.json, and syv warns when it loads it. For real "
          "output\n"
          "download a Qwen3 model (e.g. Qwen/Qwen3-0.6B) and pass its folder with --model.\n\n"
          "Example:\n"
          "  syv demo-model --tokenizer third_party/qwen3-tokenizer --out build/demo-model\n");
      app.add_option("--tokenizer", o->tokenizer_dir,
                     "Folder with the Qwen3 tokenizer.json (+ tokenizer_config.json) to copy.")
          ->required();
      app.add_option("--out", o->out_dir,
                     "Folder to write (created if missing; files overwritten).")
          ->required();
      app.add_option("--seed", o->seed, "Seed of the random weights (default 0).");
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
