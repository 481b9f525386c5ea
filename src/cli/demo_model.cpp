// `syv demo-model`: writes a random-weight Qwen3 model folder. Without --config: a tiny model with
// the real Qwen3 vocabulary and tokenizer, so `make serve` works on a fresh checkout without
// downloading a model. With --config DIR: a model of that config.json's shapes (e.g. the 8B of
// tools/bench/configs/qwen3-8b, 16.4 GB), sharded like Hugging Face checkpoints
// (model-0000N-of-0000M.safetensors + model.safetensors.index.json), written by every core at
// once; for measuring start-up and load times. Either way the output is noise.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>

#include "cli/command.h"
#include "core/thread_pool.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/hybrid_layers.h"
#include "model/prepare_model.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"

namespace syv::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string tokenizer_dir;
  std::string config_dir;
  std::string out_dir;
  uint64_t seed = 0;
  double max_shard_gb = 5.0;
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

Result<nlohmann::json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(path.string() + ": cannot open");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Error(path.string() + ": expected a JSON object");
  return j;
}

// Writes every weight of `specs` as random bf16 values (random_weight_draw(spec, seed, i), the
// values LoadOptions::random_weights gives weight i) into `out`: one model.safetensors when all
// fit in max_shard_bytes, else Hugging Face shards + model.safetensors.index.json. The data is
// produced and written (pwrite) in 16 MB chunks by the global thread pool.
// True for Hugging Face shard names: model-NNNNN-of-MMMMM.safetensors (five digits each).
bool is_shard_name(const std::string& name) {
  static constexpr std::string_view kPattern = "model-#####-of-#####.safetensors";
  if (name.size() != kPattern.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool digit = name[i] >= '0' && name[i] <= '9';
    if (kPattern[i] == '#' ? !digit : name[i] != kPattern[i]) return false;
  }
  return true;
}

Status write_random_weights(const fs::path& out, const std::vector<WeightSpec>& specs,
                            uint64_t seed, uint64_t max_shard_bytes) {
  // Earlier weights in the folder would shadow or mix with the new ones (open_dir's order).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "model.safetensors" || name == "model.safetensors.index.json" ||
        is_shard_name(name)) {
      fs::remove(entry.path(), ec);
    }
  }
  // Shards in spec order, each up to max_shard_bytes (a larger tensor gets a shard of its own).
  std::vector<std::vector<size_t>> shards;
  uint64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t bytes = static_cast<uint64_t>(specs[i].numel()) * 2;
    if (shards.empty() || (in_shard > 0 && in_shard + bytes > max_shard_bytes)) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
    total += bytes;
  }
  auto shard_file = [&](size_t s) {
    if (shards.size() == 1) return std::string("model.safetensors");
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    return std::string(name);
  };

  struct Chunk {
    int fd;
    uint64_t file_offset;
    size_t spec;
    int64_t begin, count;  // elements
  };
  constexpr int64_t kChunkElems = int64_t{8} << 20;  // 16 MB of bf16
  std::vector<Chunk> chunks;
  std::vector<int> fds;
  auto close_all = [&] {
    for (int fd : fds) ::close(fd);
  };
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string path = (out / shard_file(s)).string();
    std::vector<TensorToWrite> tensors;
    for (size_t i : shards[s]) {
      tensors.push_back({specs[i].name, DType::BF16, specs[i].shape, nullptr});
      weight_map[specs[i].name] = shard_file(s);
    }
    Result<SafetensorsLayout> layout = safetensors_layout(path, tensors, {{"format", "pt"}});
    if (!layout.ok()) {
      close_all();
      return layout.status();
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      close_all();
      return Status::Error(path + ": cannot create: " + std::strerror(errno));
    }
    fds.push_back(fd);
    if (::ftruncate(fd, static_cast<off_t>(layout->file_size)) != 0 ||
        ::pwrite(fd, layout->prefix.data(), layout->prefix.size(), 0) !=
            static_cast<ssize_t>(layout->prefix.size())) {
      const int e = errno;
      close_all();
      return Status::Error(path + ": write failed: " + std::strerror(e));
    }
    for (size_t j = 0; j < shards[s].size(); ++j) {
      const size_t i = shards[s][j];
      for (int64_t b = 0; b < specs[i].numel(); b += kChunkElems) {
        chunks.push_back({fd, layout->offsets[j] + static_cast<uint64_t>(b) * 2, i, b,
                          std::min(kChunkElems, specs[i].numel() - b)});
      }
    }
  }

  std::mutex error_mutex;
  std::string error;
  ThreadPool::global().parallel_for(
      static_cast<int64_t>(chunks.size()),
      [&](int64_t first, int64_t last) {
        std::vector<uint16_t> buf(static_cast<size_t>(kChunkElems));
        for (int64_t c = first; c < last; ++c) {
          const Chunk& ch = chunks[static_cast<size_t>(c)];
          const RandomWeightDraw draw = random_weight_draw(specs[ch.spec], seed, ch.spec);
          for (int64_t k = 0; k < ch.count; ++k) buf[k] = f32_to_bf16(draw.value(ch.begin + k));
          const char* p = reinterpret_cast<const char*>(buf.data());
          size_t left = static_cast<size_t>(ch.count) * 2;
          uint64_t at = ch.file_offset;
          while (left > 0) {
            const ssize_t n = ::pwrite(ch.fd, p, left, static_cast<off_t>(at));
            if (n <= 0) {
              if (n < 0 && errno == EINTR) continue;
              std::lock_guard<std::mutex> lock(error_mutex);
              if (error.empty())
                error = "writing " + specs[ch.spec].name + ": " + std::strerror(errno);
              return;
            }
            p += n;
            at += static_cast<uint64_t>(n);
            left -= static_cast<size_t>(n);
          }
        }
      },
      1);
  for (int fd : fds) {
    if (::close(fd) != 0 && error.empty()) error = std::string("close: ") + std::strerror(errno);
  }
  if (!error.empty()) return Status::Error(out.string() + ": " + error);
  if (shards.size() > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    SYV_RETURN_IF_ERROR(write_json(out / "model.safetensors.index.json", index));
  }
  return Status::Ok();
}

int run(const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path tok(o.tokenizer_dir);
  if (o.config_dir.empty() && o.tokenizer_dir.empty())
    return fail(
        "--tokenizer: required without --config (the demo model uses the Qwen3 tokenizer)",
        "run tools/setup/fetch-tokenizer.sh and pass --tokenizer third_party/qwen3-tokenizer");
  if (!o.tokenizer_dir.empty() && !fs::is_regular_file(tok / "tokenizer.json"))
    return fail("--tokenizer: " + (tok / "tokenizer.json").string() + " not found",
                "run tools/setup/fetch-tokenizer.sh, or point --tokenizer at a Qwen3 model folder");
  if (!(o.max_shard_gb > 0)) return fail("--max-shard-size: expected a positive number of GB");

  ModelConfig c;
  nlohmann::json config, generation;
  if (o.config_dir.empty()) {
    c = demo_config();
    config = {
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
    };
    generation = {{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}};
  } else {
    Result<ModelConfig> read = load_model_config(o.config_dir);
    if (!read.ok()) return fail("--config: " + read.message());
    c = *read;
    if (c.model_type != "qwen3" && c.model_type != "qwen3_5_text")
      return fail("--config: model_type \"" + c.model_type +
                  "\": demo-model writes dense qwen3 and qwen3_5_text weights only");
    const Status valid =
        c.model_type == "qwen3" ? validate_qwen3_config(c) : validate_hybrid_config(c);
    if (!valid.ok()) return fail("--config: " + o.config_dir + "/" + valid.message());
    if (c.num_experts > 0)
      return fail("--config: num_experts = " + std::to_string(c.num_experts) +
                  ": demo-model writes dense MLPs only");
    Result<nlohmann::json> j = read_json(fs::path(o.config_dir) / "config.json");
    if (!j.ok()) return fail("--config: " + j.message());
    config = *j;
    const fs::path gen = fs::path(o.config_dir) / "generation_config.json";
    if (fs::exists(gen)) {
      Result<nlohmann::json> g = read_json(gen);
      if (!g.ok()) return fail("--config: " + g.message());
      generation = *g;
    }
  }
  config["syv_demo"] = true;  // load_model warns that the output is noise

  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return fail("--out: cannot create \"" + o.out_dir + "\": " + ec.message());
  const fs::path out(o.out_dir);
  if (Status s = write_json(out / "config.json", config); !s.ok())
    return fail("--out: " + s.message());
  if (!generation.is_null()) {
    if (Status s = write_json(out / "generation_config.json", generation); !s.ok())
      return fail("--out: " + s.message());
  }

  Result<std::vector<WeightSpec>> listed = config_weight_specs(c);
  if (!listed.ok()) return fail("--config: " + listed.message());
  const std::vector<WeightSpec>& specs = *listed;
  const auto tw = std::chrono::steady_clock::now();
  const auto max_shard = static_cast<uint64_t>(o.max_shard_gb * 1e9);
  if (Status s = write_random_weights(out, specs, o.seed, max_shard); !s.ok())
    return fail("--out: " + s.message());
  const double write_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count();
  int64_t params = 0;
  for (const WeightSpec& s : specs) params += s.numel();

  if (!o.tokenizer_dir.empty()) {
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      if (!fs::exists(tok / name)) {
        std::fprintf(stderr, "note: %s has no %s; not copied\n", o.tokenizer_dir.c_str(), name);
        continue;
      }
      fs::copy_file(tok / name, out / name, fs::copy_options::overwrite_existing, ec);
      if (ec) return fail("--out: copying " + (tok / name).string() + ": " + ec.message());
    }
  }
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "wrote a random-weight model (its output is noise) to %s: %.3f GB of bf16 weights "
               "(%.1fM parameters) in %.2f s (%.2f GB/s), %.2f s in all\n",
               o.out_dir.c_str(), 2e-9 * static_cast<double>(params), params / 1e6, write_s,
               2e-9 * static_cast<double>(params) / std::max(write_s, 1e-9), total_s);
  if (o.tokenizer_dir.empty()) {
    std::fprintf(stderr, "note: no --tokenizer given; `syv serve` / `generate` need one in %s\n",
                 o.out_dir.c_str());
  }
  std::fprintf(stderr, "try: syv generate --model %s --prompt 'Hello' --max-tokens 8\n",
               o.out_dir.c_str());
  return 0;
}

CommandRegistration reg{
    "demo-model",
    "Write a random-weight Qwen3 folder: tiny (real tokenizer) or any config's shapes",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.footer(
          "Without --config the model has the real Qwen3 vocabulary (151936) and tokenizer but\n"
          "only 2 layers of width 64 with random bf16 weights: every request path works, the text\n"
          "is noise. With --config DIR it has the shapes of DIR/config.json (qwen3, or a dense\n"
          "qwen3_5_text hybrid), sharded like Hugging Face checkpoints (--max-shard-size), to\n"
          "measure loading and start-up at real sizes. Either way config.json is marked "
          "\"syv_demo\": true and syv warns when it\n"
          "loads it. The weights equal --random-weights with the same --seed (bf16-rounded). For\n"
          "real output download a Qwen3 model (e.g. Qwen/Qwen3-0.6B) and pass it with --model.\n\n"
          "Examples:\n"
          "  syv demo-model --tokenizer third_party/qwen3-tokenizer --out build/demo-model\n"
          "  syv demo-model --config tools/bench/configs/qwen3-8b \\\n"
          "                 --tokenizer third_party/qwen3-tokenizer --out /tmp/qwen3-8b-random\n"
          "  syv demo-model --config tools/bench/configs/qwen3.5-9b-class \\\n"
          "                 --tokenizer third_party/qwen3-tokenizer --out "
          "/tmp/qwen3.5-9b-random\n");
      app.add_option("--tokenizer", o->tokenizer_dir,
                     "Folder with the Qwen3 tokenizer.json (+ tokenizer_config.json) to copy\n"
                     "(required without --config).");
      app.add_option("--config", o->config_dir,
                     "Folder with a qwen3 config.json (+ generation_config.json) whose shapes to "
                     "write.");
      app.add_option("--out", o->out_dir,
                     "Folder to write (created if missing; files overwritten).")
          ->required();
      app.add_option("--seed", o->seed, "Seed of the random weights (default 0).");
      app.add_option("--max-shard-size", o->max_shard_gb,
                     "Largest shard in GB (1e9 bytes); more weights than this are split into\n"
                     "model-0000N-of-0000M.safetensors + model.safetensors.index.json.")
          ->capture_default_str();
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
