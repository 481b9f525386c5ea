// `syv bench schedule`: the engine's schedule for N identical requests submitted at once, on a
// model that computes nothing, so a workload's steps, preemptions and recomputed tokens can be
// studied (and a scheduling policy changed and compared) on any machine in seconds. The engine
// is the real one (scheduler, prefix cache, host tier); the model returns all-zero logits over a
// 16-token vocabulary (greedy: token 0, EOS ignored) and its K/V is 8 bytes a token, so pool and
// host tier are sized in pages, not bytes. What it cannot say is time: a step's cost on a GPU
// depends on its rows and contexts, which it reports (decode rows and the K/V positions they
// read) for a cost model. On the H200's Qwen3-8B run of 512 x (1,024 in, 1,024 out) with a
// 780,992-token pool it gives the steps and preemptions measured there (docs/performance.md).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli/bench.h"
#include "cli/engine_args.h"
#include "engine/engine_core.h"
#include "kv/host_tier.h"
#include "model/model.h"

namespace syv::cli {
namespace {

// Zero logits, no cache of its own: the engine's bookkeeping is all that runs.
class ScheduleOnlyModel final : public Model {
 public:
  explicit ScheduleOnlyModel(std::unique_ptr<Backend> backend) : backend_(std::move(backend)) {
    config_.model_type = "schedule-only";
    config_.vocab_size = kVocab;
    config_.max_position_embeddings = 1 << 24;
  }
  const ModelConfig& config() const override { return config_; }
  CacheSpec cache_spec() const override {
    CacheSpec spec;
    spec.add_kv_layer({1, 1, DType::F32});  // K and V: 8 bytes a token
    return spec;
  }
  Backend& backend() override { return *backend_; }
  void bind_cache(CacheStore& store) override { (void)store; }
  using Model::forward;
  void forward(const Batch& batch, Outputs& out) override {
    const int64_t rows = static_cast<int64_t>(batch.logit_rows.size());
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(rows, 1) * kVocab) * sizeof(float);
    if (logits_.bytes() < bytes) {
      logits_ = backend_->allocate(bytes);
      backend_->fill_zero(logits_.data(), bytes);
    }
    out.logits = Tensor(logits_.data(), DType::F32, {rows, kVocab});
    out.hidden = Tensor();
  }

 private:
  static constexpr int64_t kVocab = 16;
  std::unique_ptr<Backend> backend_;
  ModelConfig config_;
  DeviceBuffer logits_;
};

struct Options {
  EngineArgs engine;
  int32_t num_requests = 512;
  int32_t input_len = 1024;
  int32_t output_len = 1024;
  int32_t host_pages = 0;
  bool json = false;
};

int run(const Options& o) {
  if (o.num_requests < 1 || o.input_len < 1 || o.output_len < 1)
    return fail("--num-requests, --input-len and --output-len must be >= 1");
  EngineOptions options = o.engine.resolved();
  if (options.num_pages <= 0)
    return fail(
        "--num-pages: expected the pool's pages (> 0), found " + std::to_string(options.num_pages),
        "the model here has no bytes to size a pool by: give the pool of the run you "
        "study in pages, e.g. 780992 tokens / 64 = 12203");
  if (o.host_pages < 0)
    return fail("--host-pages: expected >= 0, found " + std::to_string(o.host_pages));
  options.host_num_pages = o.host_pages;
  options.host_cache_bytes = 0;
  options.host_fault_in_background = false;  // deterministic
  options.cuda_graphs = "off";
  options.emit_after_launch = 0;
  ScheduleOnlyModel model(make_cpu_backend());
  auto created = EngineCore::create(model, nullptr, options);
  if (!created.ok()) return fail(created.message());
  EngineCore& core = **created;

  std::mt19937 rng(1);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int32_t i = 0; i < o.num_requests; ++i) {
    Request r;
    r.prompt_ids.resize(static_cast<size_t>(o.input_len));
    for (int32_t& t : r.prompt_ids) t = static_cast<int32_t>(rng() % 16);
    r.params.temperature = 0.0f;
    r.params.max_tokens = o.output_len;
    r.params.ignore_eos = true;
    if (Status s = core.validate(r); !s.ok()) return fail(s.message());
    handles.push_back(std::make_shared<RequestHandle>(static_cast<uint64_t>(i), 1));
    core.add_request(static_cast<uint64_t>(i), std::move(r), handles.back());
  }
  uint64_t max_rows = 0;
  while (core.has_work()) {
    core.step();
    Event e;
    for (auto& h : handles)
      while (h->try_next(e) == NextStatus::kEvent) {
      }
    max_rows = std::max<uint64_t>(max_rows, static_cast<uint64_t>(core.stats().running));
    core.between_steps(/*idle=*/!core.has_work());
  }
  const EngineStats& s = core.stats();
  // Each request feeds its prompt and all but its last generated token once.
  const uint64_t ideal =
      static_cast<uint64_t>(o.num_requests) * static_cast<uint64_t>(o.input_len + o.output_len - 1);
  const uint64_t recomputed = s.computed_tokens > ideal ? s.computed_tokens - ideal : 0;
  const double mean_rows =
      s.decode_steps > 0 ? static_cast<double>(s.decode_rows) / static_cast<double>(s.decode_steps)
                         : 0.0;
  const HostTier* host = core.host_tier();
  if (o.json) {
    nlohmann::json j = {{"steps", s.steps},
                        {"decode_steps", s.decode_steps},
                        {"other_steps", s.other_steps},
                        {"preemptions", s.preemptions},
                        {"computed_tokens", s.computed_tokens},
                        {"recomputed_tokens", recomputed},
                        {"decode_rows", s.decode_rows},
                        {"decode_mean_rows", mean_rows},
                        {"decode_context_tokens", s.decode_context_tokens},
                        {"other_tokens", s.other_tokens},
                        {"host_page_hits", host ? host->counters().page_hits : 0}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "%d x (%d in, %d out), %d pages of %d tokens, max_num_seqs %d, budget %d, host pages %d\n"
      "steps %llu: %llu decode (mean %.1f rows, %llu K/V positions read), %llu other (%llu "
      "tokens)\npreemptions %llu; computed %llu tokens, %llu of them recomputed (%.1f%% more than "
      "the %llu the requests need)",
      o.num_requests, o.input_len, o.output_len, options.num_pages, options.page_size,
      options.max_num_seqs, options.max_num_batched_tokens, o.host_pages,
      static_cast<unsigned long long>(s.steps), static_cast<unsigned long long>(s.decode_steps),
      mean_rows, static_cast<unsigned long long>(s.decode_context_tokens),
      static_cast<unsigned long long>(s.other_steps),
      static_cast<unsigned long long>(s.other_tokens),
      static_cast<unsigned long long>(s.preemptions),
      static_cast<unsigned long long>(s.computed_tokens),
      static_cast<unsigned long long>(recomputed),
      100.0 * static_cast<double>(recomputed) / static_cast<double>(ideal),
      static_cast<unsigned long long>(ideal));
  if (host != nullptr)
    std::printf("; host tier: %llu pages loaded back",
                static_cast<unsigned long long>(host->counters().page_hits));
  std::printf("\n");
  return 0;
}

BenchRegistration reg{
    "schedule",
    "The engine's schedule (steps, preemptions, recomputed tokens) for N identical requests on "
    "a model that computes nothing",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      add_engine_args(app, o->engine);
      app.add_option("--num-requests", o->num_requests,
                     "Requests, submitted at once (default 512).");
      app.add_option("--input-len", o->input_len, "Prompt tokens each (default 1024).");
      app.add_option("--output-len", o->output_len, "Generated tokens each (default 1024).");
      app.add_option("--host-pages", o->host_pages,
                     "Host tier pages under the pool (default 0: off).");
      app.add_flag("--json", o->json, "Print the figures as one JSON object.");
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
