// A scripted Generator for testing the HTTP layer without a model: every request produces, for
// each sample, one token per tick whose text comes from `script` (cycled), up to max_tokens
// ("length") or the end of the script when finish_with_stop is set ("stop"). Prompt logprobs
// (params.prompt_logprobs) come with sample 0's first event: position p gets logprob -p/4 and rank
// p; max_tokens 0 ends at once ("length", no token). Honors cancel()
// (each unfinished sample gets an "abort" event), counts cancels, can be paused to hold
// requests in flight, and can refuse submits as a stopped engine does.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/generator.h"

namespace syv::testing {

class FakeGenerator final : public server::Generator {
 public:
  explicit FakeGenerator(int32_t max_model_len = 256) : max_model_len_(max_model_len) {
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeGenerator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void set_script(std::vector<std::string> script, bool finish_with_stop) {
    std::lock_guard<std::mutex> lock(mu_);
    script_ = std::move(script);
    finish_with_stop_ = finish_with_stop;
  }
  void set_tick(std::chrono::milliseconds tick) { tick_ms_ = static_cast<int>(tick.count()); }
  void pause(bool paused) { paused_ = paused; }
  // Refuses every submit() as the real engine does once stopped (Status code kUnavailable).
  void set_stopped(bool stopped) { stopped_ = stopped; }

  Result<std::shared_ptr<RequestHandle>> submit(Request request) override {
    if (Status st = request.params.validate(); !st.ok()) return st;
    if (stopped_)
      return Status::Unavailable("engine: not accepting requests (stopped or stopping)");
    auto handle = std::make_shared<RequestHandle>(next_id_++, request.params.n);
    std::lock_guard<std::mutex> lock(mu_);
    Live live;
    live.handle = handle;
    live.request = std::move(request);
    live.steps.assign(static_cast<size_t>(live.request.params.n), 0);
    live_.push_back(std::move(live));
    ++submitted_;
    return handle;
  }
  void cancel(const RequestHandle& handle) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (Live& l : live_) {
      if (l.handle->id() == handle.id()) l.cancelled = true;
    }
  }
  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    EngineStats s;
    s.running = static_cast<int32_t>(live_.size());
    s.pages_used = static_cast<int32_t>(live_.size());
    s.pages_free = 100 - s.pages_used;
    return s;
  }
  int32_t max_model_len() const override { return max_model_len_; }

  int cancels() const { return cancels_.load(); }
  int submitted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  size_t live() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }
  // The last request submitted (copy).
  Request last_request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.empty() ? last_ : live_.back().request;
  }

 private:
  struct Live {
    std::shared_ptr<RequestHandle> handle;
    Request request;
    std::vector<int> steps;  // tokens produced per sample; -1 once finished
    bool cancelled = false;
  };

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(tick_ms_.load()));
      if (stop_) break;
      for (auto it = live_.begin(); it != live_.end();) {
        Live& l = *it;
        bool all_done = true;
        for (size_t s = 0; s < l.steps.size(); ++s) {
          if (l.steps[s] < 0) continue;
          Event ev;
          ev.sample_index = static_cast<int32_t>(s);
          ev.prompt_tokens = static_cast<int32_t>(l.request.prompt_ids.size());
          if (l.cancelled) {
            ev.finish_reason = "abort";
            l.steps[s] = -1;
            l.handle->channel().push(std::move(ev));
            continue;
          }
          if (paused_) {
            all_done = false;
            continue;
          }
          const int step = l.steps[s]++;
          const SamplingParams& params = l.request.params;
          if (step == 0 && s == 0 && params.prompt_logprobs >= 0) {
            // Position p: the prompt token, logprob -p/4, rank p, alternatives 1000 + k.
            for (size_t p = 1; p < l.request.prompt_ids.size(); ++p) {
              PromptLogprob e;
              e.token = {l.request.prompt_ids[p], -0.25f * static_cast<float>(p)};
              e.rank = static_cast<int32_t>(p);
              for (int k = 0; k < params.prompt_logprobs; ++k)
                e.top.push_back({1000 + k, -0.5f - static_cast<float>(k)});
              ev.prompt_logprobs.push_back(std::move(e));
            }
          }
          if (params.max_tokens == 0) {  // the prompt scored, nothing generated
            ev.finish_reason = "length";
            l.steps[s] = -1;
            l.handle->channel().push(std::move(ev));
            continue;
          }
          ev.token_id = 1000 + step;  // ordinary text tokens of the Qwen vocabulary
          ev.text = script_.empty() ? "t" + std::to_string(step) + " "
                                    : script_[static_cast<size_t>(step) % script_.size()];
          if (l.request.params.logprobs) {
            ev.logprob = TokenLogprob{ev.token_id, -0.5f};
            for (int k = 0; k < l.request.params.top_logprobs; ++k) {
              ev.top_logprobs.push_back({ev.token_id + k, -0.5f - static_cast<float>(k)});
            }
          }
          if (finish_with_stop_ && static_cast<size_t>(step + 1) == script_.size()) {
            ev.finish_reason = "stop";
          } else if (step + 1 >= l.request.params.max_tokens) {
            ev.finish_reason = "length";
          }
          if (ev.finished()) {
            l.steps[s] = -1;
          } else {
            all_done = false;
          }
          l.handle->channel().push(std::move(ev));
        }
        if (all_done) {
          if (l.cancelled) ++cancels_;
          last_ = l.request;
          it = live_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  int32_t max_model_len_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<Live> live_;
  Request last_;
  std::vector<std::string> script_;
  bool finish_with_stop_ = false;
  std::atomic<int> tick_ms_{2};
  std::atomic<bool> paused_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<int> cancels_{0};
  std::atomic<uint64_t> next_id_{1};
  int submitted_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace syv::testing
