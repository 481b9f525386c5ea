// load_model(): reads config.json, finds the architecture in the registry, opens the weights.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/log.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/registry.h"

namespace syv {

namespace {

// `syv demo-model` marks its output with "syv_demo": true in config.json.
bool is_demo_model(const std::string& dir) {
  std::ifstream in(std::filesystem::path(dir) / "config.json");
  if (!in) return false;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("syv_demo", false) == true;
}

}  // namespace

void Model::mtp_forward(const Batch& batch, const Tensor& hidden, Outputs& out) {
  (void)batch;
  (void)hidden;
  (void)out;
  SYV_FATAL() << "mtp_forward() on a model loaded without an MTP head (LoadOptions::mtp)";
}

Result<std::unique_ptr<CacheStore>> make_cache_store(Model& model, const CacheConfig& config) {
  SYV_ASSIGN_OR_RETURN(std::unique_ptr<CacheStore> store,
                       CacheStore::create(model.cache_spec(), config, model.backend()));
  model.bind_cache(*store);
  return store;
}

Result<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend,
                                          const LoadOptions& options) {
  if (!std::filesystem::is_directory(dir)) {
    return Status::Error("model folder \"" + dir + "\" does not exist or is not a directory");
  }
  SYV_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(dir));
  if (is_demo_model(dir)) {
    SYV_LOG(WARN) << dir << " is a syv demo model (`syv demo-model`): random weights, so its "
                  << "output is noise. Point syv at a real Hugging Face Qwen3 folder with "
                  << "--model DIR (e.g. `make serve MODEL=/path/to/Qwen3-0.6B`).";
  }
  const ModelArch* arch = find_model_arch(config.model_type);
  if (arch == nullptr) {
    return Status::Error(
        dir + "/config.json: model_type \"" + config.model_type +
        "\" is not supported by this build; supported: " + supported_model_types());
  }
  if (arch->needs_hybrid_ops && !backend.supports_hybrid_ops()) {
    return Status::Error(dir + "/config.json: model_type \"" + config.model_type +
                         "\" is a hybrid (Gated DeltaNet) model, which the " + backend.name() +
                         " backend cannot run yet; use the CPU backend (--device cpu)");
  }
  std::optional<WeightStore> store;
  if (options.random_weights) {
    SYV_LOG(INFO) << "weights: random (seed " << options.seed << "), not read from " << dir;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    SYV_ASSIGN_OR_RETURN(WeightStore opened, WeightStore::open_dir(dir));
    store = std::move(opened);
    char line[160];
    std::snprintf(line, sizeof line,
                  "weights: %zu safetensors file(s), %zu tensors, %.2f GB; headers checked in "
                  "%.3f s",
                  store->files().size(), store->names().size(), store->total_bytes() / 1e9,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    SYV_LOG(INFO) << line;
  }
  const WeightStore* weights = store ? &*store : nullptr;
  return arch->load(config, weights, backend, options);
}

}  // namespace syv
