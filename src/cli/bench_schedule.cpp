// `syv bench schedule`: the engine's schedule for N identical requests submitted at once, on a
// model that computes nothing, so a workload's steps, preemptions and recomputed tokens can be
// studied (and a scheduling policy changed and compared) on any machine in seconds. The engine
// is the real one (scheduler, prefix cache, host tier); the model returns all-zero logits over a
// 16-token vocabulary (greedy: token 0, EOS ignored) and its K/V is 8 bytes a token, so pool and
// host tier are sized in pages, not bytes. What it cannot say is time: a step's cost on a GPU
// depends on its rows and contexts, which it reports (decode rows and the K/V positions they
// read) and, given a model's config and a machine's ceilings (--config, --copy-gbps,
// --gemm-tflops), the schedule's floor: per step, the GEMMs at the GEMM rate or the weights at
// the copy rate, whichever is longer, plus the decode rows' K/V reads at the copy rate (prefill
// attention, norms and the other small kernels not counted). On the H200's Qwen3-8B run of
// 512 x (1,024 in, 1,024 out) with a 780,992-token pool it gives the steps and preemptions
// measured there (docs/performance.md).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli/bench.h"
#include "cli/engine_args.h"
#include "cli/kv_cache_dtype.h"
#include "cli/step_budget.h"
#include "engine/engine_core.h"
#include "io/hf_config.h"
#include "kv/host_tier.h"
#include "model/model.h"
#include "model/prepare_model.h"
#include "model/registry.h"

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
  double range_ratio = 0;  // lengths uniform over [L(1 - r), L(1 + r)] (0: every request alike)
  int32_t host_pages = 0;
  bool json = false;
  // The floor (all three, or none): a dense model's config folder, the machine's ceilings.
  std::string config;
  double copy_gbps = 0, gemm_tflops = 0;
};

// What a step costs at the ceilings, from a dense model's config (bf16 weights): FLOPs per token
// fed (every linear but the lm_head) and per row sampled (the lm_head), weight bytes a step reads,
// K/V bytes a position holds in the flag's --kv-cache-dtype.
struct FloorModel {
  double flops_per_token = 0, flops_per_sampled = 0;
  double weight_bytes = 0, kv_bytes = 0;
  double copy_bytes_per_s = 0, gemm_flops_per_s = 0;
  // Seconds of one step: `tokens` fed, `sampled` rows with logits, `kv_positions` read by decode.
  double step_seconds(double tokens, double sampled, double kv_positions) const {
    const double gemm = (tokens * flops_per_token + sampled * flops_per_sampled) / gemm_flops_per_s;
    return std::max(gemm, weight_bytes / copy_bytes_per_s) +
           kv_positions * kv_bytes / copy_bytes_per_s;
  }
};

Result<FloorModel> floor_model(const Options& o) {
  auto config = load_model_config(o.config);
  if (!config.ok()) return Status::Error("--config: " + config.message());
  const ModelConfig& c = *config;
  const ModelArch* arch = find_model_arch(c.model_type);
  if (arch == nullptr || c.model_type != "qwen3")
    return Status::Error("--config: the floor is for dense qwen3 configs, found model_type \"" +
                         c.model_type + "\"");
  auto specs = config_weight_specs(c);
  if (!specs.ok()) return Status::Error("--config: " + specs.message());
  double parameters = 0;
  for (const WeightSpec& w : *specs) parameters += static_cast<double>(w.numel());
  auto kv = parse_kv_cache_dtype(o.engine.kv_cache_dtype);
  if (!kv.ok()) return kv.status();
  const double table = static_cast<double>(c.vocab_size) * static_cast<double>(c.hidden_size);
  // The embedding is read by rows; the lm_head (tied or not) is a GEMM of the sampled rows.
  const double body = parameters - table - (c.tie_word_embeddings ? 0.0 : table);
  FloorModel f;
  // The linears a prompt token runs through, as serve's step budget counts them (2 x body).
  SYV_ASSIGN_OR_RETURN(f.flops_per_token, prefill_flops_per_token(c));
  f.flops_per_sampled = 2 * table;
  f.weight_bytes = 2 * (body + table);
  f.kv_bytes =
      static_cast<double>(arch->cache_spec(c, kv->value_or(DType::BF16)).kv_bytes_per_token);
  f.copy_bytes_per_s = o.copy_gbps * 1e9;
  f.gemm_flops_per_s = o.gemm_tflops * 1e12;
  return f;
}

int run(const Options& o) {
  if (o.range_ratio < 0 || o.range_ratio >= 1)
    return fail("--range-ratio: expected [0, 1), found " + std::to_string(o.range_ratio));
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
  const bool with_floor = !o.config.empty() || o.copy_gbps > 0 || o.gemm_tflops > 0;
  if (with_floor && (o.config.empty() || o.copy_gbps <= 0 || o.gemm_tflops <= 0))
    return fail("the floor needs --config, --copy-gbps and --gemm-tflops together",
                "take the ceilings from `syv bench kernels` on the GPU (docs/performance.md "
                "lists the H200's: ~4250 GB/s, ~800 TFLOP/s)");
  FloorModel floor;
  if (with_floor) {
    auto f = floor_model(o);
    if (!f.ok()) return fail(f.message());
    floor = *f;
  }
  options.host_num_pages = o.host_pages;
  options.host_cache_bytes = 0;
  options.host_fault_in_background = false;  // deterministic
  options.cuda_graphs = "off";
  options.emit_after_launch = 0;
  // The schedule of a CUDA run, which admits host-tier hits after the launch by default.
  if (options.admit_loads_after_launch < 0) options.admit_loads_after_launch = 1;
  ScheduleOnlyModel model(make_cpu_backend());
  auto created = EngineCore::create(model, nullptr, options);
  if (!created.ok()) return fail(created.message());
  EngineCore& core = **created;

  std::mt19937 rng(1);
  // A length drawn around `len` (>= 1), as `syv bench serve --range-ratio` draws them.
  auto draw = [&](int32_t len) {
    const int32_t lo = std::max(1, static_cast<int32_t>(len * (1 - o.range_ratio)));
    const int32_t hi = std::max(lo, static_cast<int32_t>(len * (1 + o.range_ratio)));
    return lo + static_cast<int32_t>(rng() % static_cast<uint32_t>(hi - lo + 1));
  };
  // Tokens the requests compute once (each its prompt and all but its last generated token), and
  // the tokens they return.
  uint64_t ideal = 0, output_tokens = 0;
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int32_t i = 0; i < o.num_requests; ++i) {
    Request r;
    const int32_t in = draw(o.input_len), out = draw(o.output_len);
    ideal += static_cast<uint64_t>(in + out - 1);
    output_tokens += static_cast<uint64_t>(out);
    r.prompt_ids.resize(static_cast<size_t>(in));
    for (int32_t& t : r.prompt_ids) t = static_cast<int32_t>(rng() % 16);
    r.params.temperature = 0.0f;
    r.params.max_tokens = out;
    r.params.ignore_eos = true;
    if (Status s = core.validate(r); !s.ok()) return fail(s.message());
    handles.push_back(std::make_shared<RequestHandle>(static_cast<uint64_t>(i), 1));
    core.add_request(static_cast<uint64_t>(i), std::move(r), handles.back());
  }
  double floor_s = 0;
  while (core.has_work()) {
    const EngineStats& s = core.stats();
    const uint64_t computed = s.computed_tokens, sampled = s.generated_tokens,
                   kv_positions = s.decode_context_tokens;
    core.step();
    if (with_floor)
      floor_s += floor.step_seconds(static_cast<double>(s.computed_tokens - computed),
                                    static_cast<double>(s.generated_tokens - sampled),
                                    static_cast<double>(s.decode_context_tokens - kv_positions));
    Event e;
    for (auto& h : handles)
      while (h->try_next(e) == NextStatus::kEvent) {
      }
    core.between_steps(/*idle=*/!core.has_work());
  }
  const EngineStats& s = core.stats();
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
                        {"tokens_needed", ideal},
                        {"decode_rows", s.decode_rows},
                        {"decode_mean_rows", mean_rows},
                        {"decode_context_tokens", s.decode_context_tokens},
                        {"other_tokens", s.other_tokens},
                        {"host_page_hits", host ? host->counters().page_hits : 0}};
    if (with_floor) {
      j["floor_s"] = floor_s;
      j["floor_output_tokens_per_s"] = static_cast<double>(output_tokens) / floor_s;
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "%d x (%d in, %d out, +-%.0f%%), %d pages of %d tokens, max_num_seqs %d, budget %d, host "
      "pages %d\n"
      "steps %llu: %llu decode (mean %.1f rows, %llu K/V positions read), %llu other (%llu "
      "tokens)\npreemptions %llu; computed %llu tokens, %llu of them recomputed (%.1f%% more than "
      "the %llu the requests need)",
      o.num_requests, o.input_len, o.output_len, 100 * o.range_ratio, options.num_pages,
      options.page_size, options.max_num_seqs, options.max_num_batched_tokens, o.host_pages,
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
  if (with_floor)
    std::printf(
        "floor at %.0f GB/s and %.0f TFLOP/s (%s, %.0f bytes of K/V a token): %.2f s, %.0f "
        "output tok/s\n",
        o.copy_gbps, o.gemm_tflops, o.config.c_str(), floor.kv_bytes, floor_s,
        static_cast<double>(output_tokens) / floor_s);
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
      app.add_option("--range-ratio", o->range_ratio,
                     "Spread each request's lengths uniformly over [L(1-r), L(1+r)] (default 0: "
                     "all alike, the worst case for a pool: every sequence grows in lockstep).");
      app.add_option("--host-pages", o->host_pages,
                     "Host tier pages under the pool (default 0: off).");
      app.add_flag("--json", o->json, "Print the figures as one JSON object.");
      app.add_option("--config", o->config,
                     "With --copy-gbps and --gemm-tflops: a dense Qwen3 config folder whose "
                     "floor for this schedule to print (bf16 weights; K/V bytes in "
                     "--kv-cache-dtype, which does not change the schedule: the pool is in pages)");
      app.add_option("--copy-gbps", o->copy_gbps,
                     "The machine's copy ceiling (GB/s) for the floor.");
      app.add_option("--gemm-tflops", o->gemm_tflops,
                     "The machine's GEMM ceiling (TFLOP/s) for the floor.");
      // Engine flags this command cannot honour (its model has no bytes, no graphs, no GPU):
      // refused with what to give instead, never ignored.
      std::vector<std::pair<CLI::Option*, std::string>> refused;
      for (const auto& [flag, instead] :
           {std::pair<const char*, const char*>{"--kv-cache-mb",
                                                "give the pool in pages: --num-pages"},
            {"--host-cache-gb", "give the host tier in pages: --host-pages"},
            {"--cuda-graphs", "graphs do not change the schedule"},
            {"--emit-after-launch", "when events are made does not change the schedule"}})
        refused.push_back({app.get_option(flag), instead});
      CLI::Option* kv_dtype = app.get_option("--kv-cache-dtype");
      return [o, refused, kv_dtype]() -> int {
        for (const auto& [option, instead] : refused)
          if (option->count() > 0)
            return fail(option->get_name() + " is not taken by bench schedule", instead);
        if (kv_dtype->count() > 0 && o->config.empty())
          return fail("--kv-cache-dtype is only the floor's K/V bytes here: give --config too",
                      "the pool is in pages (--num-pages), whatever the K/V dtype");
        return run(*o);
      };
    }};

}  // namespace
}  // namespace syv::cli
