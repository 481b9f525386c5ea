#include "cli/bench_host_tier_loading.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine_core.h"

namespace syv::cli {
namespace {

constexpr int32_t kDecoderPromptLen = 16;
constexpr int32_t kWarmupSteps = 8;
constexpr int32_t kBeforeSteps = 32;
constexpr int32_t kMaxWaitSteps = 10000;

using Clock = std::chrono::steady_clock;

// Drives one EngineCore the way Engine's loop does, keeping each request's handle drained.
class Driver {
 public:
  explicit Driver(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {}
  EngineCore& core() { return *core_; }

  uint64_t submit(std::vector<int32_t> prompt, int32_t max_tokens) {
    Request r;
    r.prompt_ids = std::move(prompt);
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    const uint64_t id = next_id_++;
    auto handle = std::make_shared<RequestHandle>(id, 1);
    handles_.push_back(handle);
    core_->add_request(id, std::move(r), handle);
    return id;
  }
  // One step and the gap after it (the host tier's work between steps: pinning, write-ahead);
  // returns their wall time in seconds, and in `parts` (when given) where it went.
  double step(LoadingStepParts* parts = nullptr) {
    const EngineStats s0 = parts != nullptr ? core_->stats() : EngineStats();
    const auto t0 = Clock::now();
    core_->step();
    const auto t1 = Clock::now();
    Event e;
    for (auto& h : handles_)
      while (h->try_next(e) == NextStatus::kEvent) {
      }
    core_->between_steps(/*idle=*/!core_->has_work());
    const auto t2 = Clock::now();
    if (parts != nullptr) {
      const EngineStats s1 = core_->stats();
      parts->schedule_s = s1.schedule_seconds - s0.schedule_seconds;
      parts->forward_s = s1.forward_seconds - s0.forward_seconds;
      parts->output_s = s1.output_seconds - s0.output_seconds;
      parts->step_s = std::chrono::duration<double>(t1 - t0).count();
      parts->between_s = std::chrono::duration<double>(t2 - t1).count();
    }
    return std::chrono::duration<double>(t2 - t0).count();
  }
  void run() {
    while (core_->has_work()) step();
  }
  bool waiting(uint64_t id) const {
    for (const Sequence* seq : core_->scheduler().waiting())
      if (seq->group()->id == id) return true;
    return false;
  }
  // The running sequence of request `id` (null: none running).
  const Sequence* running(uint64_t id) const {
    for (const Sequence* seq : core_->scheduler().running())
      if (seq->group()->id == id) return seq;
    return nullptr;
  }

 private:
  std::unique_ptr<EngineCore> core_;
  std::vector<std::shared_ptr<RequestHandle>> handles_;
  uint64_t next_id_ = 1;
};

uint64_t stores(const EngineStats& s) {
  return s.host_pages_stored + s.host_checkpoints_stored;
}

}  // namespace

Result<LoadingDecode> measure_loading_decode(Model& model, const EngineOptions& options,
                                             int32_t prefix_len, int32_t decoders, uint64_t seed) {
  SYV_ASSIGN_OR_RETURN(std::unique_ptr<EngineCore> core,
                       EngineCore::create(model, nullptr, options));
  Driver d(std::move(core));
  if (d.core().host_tier() == nullptr) return Status::Error("the engine has no host tier");
  // Idle first, as a server after start-up: the engine pins what it pins while idle.
  while (d.core().between_steps(/*idle=*/true))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::mt19937_64 rng(seed + 1);
  const uint64_t vocab = static_cast<uint64_t>(model.config().vocab_size);
  auto random_prompt = [&](int32_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % vocab);
    return p;
  };
  // The prompt, then fillers until the device pool evicted it to the host tier.
  const std::vector<int32_t> prompt = random_prompt(prefix_len);
  d.submit(prompt, 1);
  d.run();
  const EngineOptions& o = d.core().options();
  const int64_t pool_tokens = int64_t{o.num_pages} * o.page_size;
  for (int64_t i = 0; i <= pool_tokens / prefix_len; ++i) {
    d.submit(random_prompt(prefix_len), 1);
    d.run();
  }
  // The decoders: enough tokens to outlast the warm-up, the timed steps and the load.
  const int32_t max_tokens = std::max(1, o.max_model_len - kDecoderPromptLen - 1);
  for (int32_t i = 0; i < decoders; ++i) d.submit(random_prompt(kDecoderPromptLen), max_tokens);
  LoadingDecode r;
  r.decoders = decoders;
  for (int32_t i = 0; i < kWarmupSteps; ++i) d.step();
  if (d.core().scheduler().num_running() != decoders)
    return Status::Error("the decoders did not all start (raise --num-pages or --max-num-seqs)");
  double before = 0;
  auto pieces = [&] { return d.core().stats().host_pieces_pinned; };
  for (; r.before_steps < kBeforeSteps; ++r.before_steps) {
    const uint64_t pinned = pieces();
    LoadingStepParts parts;
    r.before_step_times_s.push_back(d.step(&parts));
    r.before_step_pieces.push_back(pieces() - pinned);
    r.before_step_parts.push_back(parts);
    before += r.before_step_times_s.back();
  }
  r.before_step_s = before / r.before_steps;
  // The resend: every step after which it is still loading.
  const uint64_t host_tokens = d.core().stats().prefix_host_hit_tokens;
  const uint64_t resend = d.submit(prompt, 1);
  double loading = 0, loading_no_stores = 0;
  for (int32_t waited = 0;; ++waited) {
    const uint64_t stored = stores(d.core().stats());
    const uint64_t ahead = d.core().stats().host_pages_written_ahead;
    const uint64_t ahead_waits = d.core().stats().host_write_ahead_waits;
    const uint64_t pinned = pieces();
    LoadingStepParts parts;
    const double s = d.step(&parts);
    const Sequence* seq = d.running(resend);
    if (seq == nullptr && d.waiting(resend)) {  // not admitted yet: no step of its load
      if (waited > kMaxWaitSteps)
        return Status::Error("the resend was not admitted in " + std::to_string(kMaxWaitSteps) +
                             " steps (raise --num-pages or lower --decoders)");
      continue;
    }
    if (seq == nullptr || seq->state != SequenceState::kLoading) break;
    if (r.loading_steps == 0) {
      r.admission_step_s = s;
      r.admission_stores = stores(d.core().stats()) - stored;
    }
    ++r.loading_steps;
    loading += s;
    r.loading_step_times_s.push_back(s);
    r.loading_step_stored.push_back(stores(d.core().stats()) != stored);
    r.loading_step_written_ahead.push_back(d.core().stats().host_pages_written_ahead - ahead);
    r.loading_step_ahead_waits.push_back(d.core().stats().host_write_ahead_waits - ahead_waits);
    r.loading_step_pieces.push_back(pieces() - pinned);
    r.loading_step_parts.push_back(parts);
    if (stores(d.core().stats()) != stored) {
      ++r.loading_steps_with_stores;
    } else {
      loading_no_stores += s;
    }
  }
  const int32_t no_stores = r.loading_steps - r.loading_steps_with_stores;
  r.loading_step_s = r.loading_steps > 0 ? loading / r.loading_steps : 0;
  r.loading_step_s_no_stores = no_stores > 0 ? loading_no_stores / no_stores : 0;
  r.host_hit_tokens = d.core().stats().prefix_host_hit_tokens - host_tokens;
  r.pieces_pinned = d.core().stats().host_pieces_pinned;
  r.pin_s = d.core().stats().host_pin_seconds;
  d.core().abort_all();
  return r;
}

}  // namespace syv::cli
