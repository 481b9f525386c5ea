#include "engine/engine.h"

#include "core/check.h"
#include "core/log.h"
#include "engine/engine_core.h"
#include "model/model.h"

namespace syv {

namespace {

// While idle with the host tier's reserve short: how long the loop sleeps on its inbox between
// pinning calls (the H200 machine pinned 4,536 MiB in 1.39 s idle at start-up, pieces of up to
// 132 MB: ~38 ms a piece, faulting in and registration together).
constexpr std::chrono::milliseconds kIdlePinPoll{1};

}  // namespace

Engine::Engine(Model& model, const Tokenizer* tokenizer, EngineOptions options)
    : model_(model), tokenizer_(tokenizer), options_(options) {}

Engine::~Engine() {
  stop(/*drain=*/false);
}

Status Engine::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (core_) return Status::Error("engine: start() called twice");
  if (options_.num_speculative_tokens > 0 && options_.speculative_method.empty()) {
    return Status::Error(
        "engine option num_speculative_tokens: " + std::to_string(options_.num_speculative_tokens) +
        " drafts need a speculative_method to propose them (ngram, mtp or draft)");
  }
  SYV_ASSIGN_OR_RETURN(core_, EngineCore::create(model_, tokenizer_, options_));
  options_ = core_->options();
  cache_spec_ = core_->store().spec();
  stats_ = core_->stats();
  accepting_ = true;
  thread_ = std::thread([this] { loop(); });
  return Status::Ok();
}

void Engine::stop(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = false;
    if (!thread_.joinable()) return;
    stop_requested_ = true;
    drain_ = drain;
  }
  wake_.notify_all();
  thread_.join();
}

Result<std::shared_ptr<RequestHandle>> Engine::submit(Request request) {
  if (!core_) return Status::Unavailable("engine: not running (submit() before start())");
  SYV_RETURN_IF_ERROR(core_->validate(request));  // reads immutable configuration only
  const uint64_t id = next_id_.fetch_add(1);
  auto handle = std::make_shared<RequestHandle>(id, request.params.n);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepting_)
      return Status::Unavailable("engine: not accepting requests (stopped or stopping)");
    inbox_.push_back(Command{Command::kSubmit, handle, std::move(request), id});
  }
  wake_.notify_all();
  return handle;
}

void Engine::cancel(const RequestHandle& handle) {
  cancel(handle.id());
}

void Engine::cancel(uint64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inbox_.push_back(Command{Command::kCancel, nullptr, Request{}, request_id});
  }
  wake_.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Engine::loop() {
  std::deque<Command> commands;
  // The host tier's pinned reserve is short: pin while idle instead of sleeping (from start-up).
  bool pin_more = core_->host_tier() != nullptr;
  auto woken = [&] { return !inbox_.empty() || stop_requested_; };
  for (;;) {
    bool stop = false, drain = true;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Idle with the reserve short: the tier's next piece is being faulted in (it never waits for
      // that: a request arriving meanwhile would wait with it), so sleep on the inbox a moment
      // between its calls; a request wakes the loop at once.
      if (!core_->has_work()) {
        if (!pin_more)
          wake_.wait(lock, woken);
        else
          wake_.wait_for(lock, kIdlePinPoll, woken);
      }
      commands.swap(inbox_);
      stop = stop_requested_;
      drain = drain_;
    }
    for (Command& command : commands) {
      if (command.kind == Command::kSubmit) {
        core_->add_request(command.request_id, std::move(command.request),
                           std::move(command.handle));
      } else {
        core_->abort_request(command.request_id);
      }
    }
    commands.clear();
    if (stop && !drain) core_->abort_all();
    if (core_->has_work()) core_->step();
    // Between steps (and while idle): the host tier pins at most one piece ahead of evictions,
    // so that no step waits for a pin (kv/host_tier.h "Memory").
    pin_more = core_->between_steps(/*idle=*/!core_->has_work());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_ = core_->stats();
      if (stop && !core_->has_work() && inbox_.empty()) return;
    }
  }
}

}  // namespace syv
