#include "cli/model_session.h"

#include <cerrno>
#include <cstdlib>

#include "cli/tensor_parallel_cli.h"
#include "core/log.h"
#include "io/hf_config.h"
#ifdef SYV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace syv::cli {

void add_model_args(CLI::App& app, ModelArgs& args) {
  app.add_option("--model", args.model_dir,
                 "A Hugging Face model folder: config.json (+ generation_config.json) and\n"
                 "model.safetensors or sharded *.safetensors with model.safetensors.index.json.")
      ->required();
  app.add_flag("--random-weights", args.random_weights,
               "Ignore the safetensors files and use seeded random weights of the config's shapes\n"
               "(for timing; the output is noise). Float only: a config with a\n"
               "quantization_config is refused (quantize a folder with `syv quantize`).");
  app.add_option("--weight-seed", args.weight_seed, "Seed of --random-weights (default 0).");
  add_host_embeddings_arg(app, args.host_embeddings);
  add_quantized_activations_arg(app, args.quantized_activations);
}

void add_quantized_activations_arg(CLI::App& app, std::string& mode) {
  app.add_option("--quantized-activations", mode,
                 "What a quantized checkpoint's GEMMs (prefill, batches over 16 tokens) multiply:\n"
                 "  auto  fp8 weights take fp8 activations (W8A8: each token's 128-column groups\n"
                 "        scaled to e4m3, as vLLM runs these checkpoints; fp8 tensor cores on\n"
                 "        Hopper, elsewhere as off); int4 weights take bf16 activations (W4A16)\n"
                 "  off   bf16 activations for every format (weights dequantized: exact to them)\n"
                 "  fp8   as auto, and int4 weights of group size 128 take fp8 activations too\n"
                 "        (W4A8; Hopper only: refused elsewhere)")
      ->check(CLI::IsMember({"auto", "off", "fp8"}))
      ->capture_default_str();
  app.add_flag_callback(
      "--int8-activations",
      [] {
        throw CLI::ValidationError(
            "--int8-activations",
            "not implemented: syv's W4A8 quantizes activations to fp8 e4m3 (one scale per token "
            "and 128 columns; on Hopper fp8 and int8 tensor cores run at the same rate, and e4m3 "
            "holds int4 weights exactly). Use --quantized-activations fp8");
      },
      "Refused: see --quantized-activations fp8 (W4A8 with fp8 activations)");
}

Status apply_quantized_activations(Backend& backend, const std::string& mode, bool log) {
  using Q = Backend::QuantizedActivations;
  Q q;
  if (mode == "auto") {
    q = Q::kAuto;
  } else if (mode == "off") {
    q = Q::kOff;
  } else if (mode == "fp8") {
    q = Q::kFp8;
  } else {
    return Status::Error("--quantized-activations: expected auto, off or fp8, found \"" + mode +
                         "\"");
  }
  Status st = backend.set_quantized_activations(q);
  if (!st.ok()) return Status::Error("--quantized-activations " + mode + ": " + st.message());
  if (log && mode != "auto") {
    SYV_LOG(INFO) << "quantized activations: " << mode
                  << (q == Q::kOff ? " (every quantized weight multiplies bf16 activations)"
                                   : " (fp8 and int4 group-128 weights multiply fp8 activations "
                                     "in GEMMs: W8A8 / W4A8; int4 steps of 17-64 tokens take "
                                     "the exact W4A16 GEMM, faster there)");
  }
  return Status::Ok();
}

Status apply_quantized_activations(const std::vector<std::unique_ptr<Backend>>& ranks,
                                   const std::string& mode) {
  for (const auto& rank : ranks)
    SYV_RETURN_IF_ERROR(apply_quantized_activations(*rank, mode, false));
  return Status::Ok();
}

void add_host_embeddings_arg(CLI::App& app, bool& host_embeddings) {
  app.add_flag("--host-embeddings", host_embeddings,
               "Keep the input embedding table in pinned host memory: the GPU reads the rows a\n"
               "step looks up over the bus, and the table's device memory goes to the KV pool\n"
               "(2.5 GB on Qwen3.5-27B). Models with untied embeddings only (a tied table is\n"
               "also the lm_head, read whole every step); not with tensor parallelism. On the\n"
               "CPU backend every weight is in host memory already.");
}

void add_device_arg(CLI::App& app, std::string& device) {
  app.add_option("--device", device, "auto, cpu or cuda (auto: CUDA device 0 when there is one)")
      ->capture_default_str();
}

Result<std::unique_ptr<Backend>> make_cli_backend(const std::string& device) {
  if (device == "cpu") return std::unique_ptr<Backend>(make_cpu_backend());
#ifdef SYV_HAVE_CUDA
  if (device == "cuda" || (device == "auto" && cuda_device_count() > 0)) {
    if (cuda_device_count() == 0) return Status::Error("--device cuda: no CUDA device found");
    return std::unique_ptr<Backend>(make_cuda_backend(0));
  }
#else
  if (device == "cuda") return Status::Error("--device cuda: this build has no CUDA backend");
#endif
  if (device == "auto") return std::unique_ptr<Backend>(make_cpu_backend());
  return Status::Error("--device: expected auto, cpu or cuda, found \"" + device + "\"");
}

Result<LoadedModel> load_cli_model(const ModelArgs& args) {
  LoadedModel loaded;
  SYV_ASSIGN_OR_RETURN(loaded.backend, make_cli_backend(args.device));
  apply_batch_invariant(*loaded.backend, args.batch_invariant);
  SYV_RETURN_IF_ERROR(apply_quantized_activations(*loaded.backend, args.quantized_activations));
  LoadOptions options;
  options.random_weights = args.random_weights;
  options.seed = args.weight_seed;
  options.mtp = args.mtp;
  options.host_embeddings = args.host_embeddings;
  auto prepared = prepare_model(args.model_dir, *loaded.backend, options);
  if (!prepared.ok()) return prepared.status().with_context("--model");
  SYV_RETURN_IF_ERROR(check_tp_model(prepared->config, args.tensor_parallel_size));
  SYV_ASSIGN_OR_RETURN(TpRanks ranks, make_tp_ranks(*loaded.backend, args.tensor_parallel_size));
  auto model = load_tp_model(*prepared, ranks, options);
  if (!model.ok()) return model.status().with_context("--model");
  SYV_RETURN_IF_ERROR(apply_quantized_activations(ranks.owned, args.quantized_activations));
  loaded.rank_backends = std::move(ranks.owned);
  loaded.model = std::move(model.value());
  return loaded;
}

std::string model_load_hint(const std::string& message) {
  return message.rfind("--model", 0) == 0
             ? "--model takes a Hugging Face model folder (config.json + *.safetensors)"
             : "";
}

Result<std::unique_ptr<Model>> load_draft_model(const std::string& dir, Backend& backend) {
  if (dir.empty()) {
    return Status::Error(
        "--speculative-method draft needs --draft-model DIR (a smaller model sharing the "
        "target's tokenizer)");
  }
  auto model = load_model(dir, backend, LoadOptions{});
  if (!model.ok()) return model.status().with_context("--draft-model");
  SYV_LOG(INFO) << "draft model: " << dir << ": " << (*model)->config().model_type << ", "
                << (*model)->config().num_hidden_layers << " layers, hidden "
                << (*model)->config().hidden_size;
  return model;
}

void apply_batch_invariant(Backend& backend, bool on) {
  backend.set_batch_invariant(on);
  SYV_LOG(INFO)
      << (on ? "batch-invariant mode: on (every logits row is bit-identical whatever else "
               "is batched, however the prompt is chunked; slower, see "
               "docs/cuda-backend.md)"
             : "batch-invariant mode: off (--batch-invariant turns it on)");
}

Result<ModelConfig> read_cli_config(const ModelArgs& args) {
  auto config = load_model_config(args.model_dir);
  if (!config.ok()) return config.status().with_context("--model");
  return config;
}

Result<std::vector<int32_t>> parse_token_list(const std::string& text, int64_t vocab,
                                              const std::string& arg) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    char* end = nullptr;
    errno = 0;
    const long long value = item.empty() ? 0 : std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE) {
      return Status::Error(arg + ": expected comma-separated token ids like 1,2,3; item " +
                           std::to_string(ids.size()) + " is \"" + item + "\"");
    }
    if (value < 0 || value >= vocab) {
      return Status::Error(arg + ": token " + std::to_string(value) + " at index " +
                           std::to_string(ids.size()) + " is outside the model's vocabulary [0, " +
                           std::to_string(vocab) + ")");
    }
    ids.push_back(static_cast<int32_t>(value));
    start = comma + 1;
  }
  return ids;
}

Result<SingleSequence> SingleSequence::create(Model& model, int64_t max_tokens,
                                              std::optional<DType> kv_dtype) {
  SingleSequence seq(model);
  const int64_t num_pages = std::max<int64_t>(1, (max_tokens + kPageSize - 1) / kPageSize);
  CacheConfig cache;
  cache.page_size = kPageSize;
  cache.num_pages = static_cast<int32_t>(num_pages);
  cache.num_state_slots = 1;
  cache.kv_dtype = kv_dtype;
  SYV_ASSIGN_OR_RETURN(seq.store_, CacheStore::create(model.cache_spec(), cache, model.backend()));
  model.bind_cache(*seq.store_);
  for (int32_t p = 0; p < num_pages; ++p) seq.pages_.push_back(p);
  seq.capacity_ = num_pages * kPageSize;
  return seq;  // the store's state slot starts zeroed
}

Tensor SingleSequence::forward(const std::vector<int32_t>& tokens, bool all_rows) {
  SYV_CHECK(length_ + static_cast<int64_t>(tokens.size()) <= capacity_)
      << "sequence of " << length_ << " + " << tokens.size() << " exceeds " << capacity_;
  Batch batch;
  batch.token_ids = tokens;
  for (size_t i = 0; i < tokens.size(); ++i)
    batch.positions.push_back(static_cast<int32_t>(length_ + i));
  batch.seq_starts = {0, static_cast<int32_t>(tokens.size())};
  batch.context_lens = {static_cast<int32_t>(length_ + tokens.size())};
  batch.page_table = pages_;
  batch.max_pages_per_seq = static_cast<int32_t>(pages_.size());
  if (model_->cache_spec().has_recurrent_state()) batch.state_slots = {0};
  if (all_rows) {
    for (size_t i = 0; i < tokens.size(); ++i) batch.logit_rows.push_back(static_cast<int32_t>(i));
  } else {
    batch.logit_rows = {static_cast<int32_t>(tokens.size()) - 1};
  }
  model_->bind_cache(*store_);  // another SingleSequence of the model may have bound its own
  Tensor logits = model_->forward(batch);
  length_ += static_cast<int64_t>(tokens.size());
  return logits;
}

void SingleSequence::restart() {
  if (model_->cache_spec().has_recurrent_state()) store_->reset_slot(0);
  length_ = 0;
}

std::vector<float> SingleSequence::append(const std::vector<int32_t>& tokens, bool all_rows) {
  Tensor logits = forward(tokens, all_rows);
  std::vector<float> host(static_cast<size_t>(logits.numel()));
  model_->backend().download(host.data(), logits.data, host.size() * sizeof(float));
  return host;
}

}  // namespace syv::cli
