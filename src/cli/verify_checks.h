// `syv verify`: the checks a deployment of syv must pass, run against a live server through its
// HTTP API. Each check prints one `PASS name (detail)` or `FAIL name: what was wrong` line on
// stdout as it finishes. The server should be idle while they run (the cancel check waits for
// the running requests and held KV pages to return to 0).
#pragma once

#include <string>
#include <vector>

#include "cli/openai_client.h"

namespace syv::cli {

class Verifier {
 public:
  // The server to check; may change between checks (syv verify --model starts a second one).
  // The model id is read by run_all() (GET /v1/models) and kept.
  void set_client(const OpenAiClient& client) { client_ = &client; }

  // Every check, in order: server facts (/health, /v1/models), the deployment's facts in
  // /metrics (build, device, KV pool and memory plan), auth on every route, chat and completions,
  // a forced tool call and its round trip, the reasoning split with the model's template, the
  // streaming format, stop strings, cached tokens on resend, /metrics names, batched =
  // sequential greedy, a prompt served back from the host tier = its first greedy output (where
  // the device pool is small enough to evict), an OpenAI-shaped 400 naming the field, a
  // disconnected stream leaving the server serving with its pages freed.
  void run_all();
  // Greedy texts of `prompts` (completions, `max_tokens` each, ignore_eos), one request at a
  // time; "" for a failed request.
  // Safe from several threads at once (each request has its own connection).
  std::vector<std::string> greedy_texts(const std::vector<std::string>& prompts,
                                        int max_tokens) const;

  // The offload check needs a device pool small enough to evict. With this on, a larger pool
  // does not SKIP it: run_all() records the pool that would do (small_pool_mb() > 0, MiB of KV for
  // ~2K tokens) for `syv verify --model` to start a second server with, whose offload_check() then
  // runs it (re-reading the model's card there).
  void defer_offload_to_a_small_pool(bool on) { defer_offload_ = on; }
  int64_t small_pool_mb() const { return small_pool_mb_; }
  void offload_check(const std::string& where);

  // One greedy completion (`max_tokens`, ignore_eos): ok, its text and prompt tokens, or why not.
  struct Greedy {
    bool ok = false;
    std::string text, error;
    int64_t prompt_tokens = 0;
  };
  Greedy greedy(const std::string& prompt, int max_tokens) const;

  // Records one result and prints its line.
  void check(const std::string& name, bool ok, const std::string& detail);
  // A check that cannot apply to this model (its tokenizer or template lacks what it tests):
  // prints `SKIP name: reason`, counted apart from passes and failures.
  void skip(const std::string& name, const std::string& reason);
  int passed() const { return passed_; }
  int failed() const { return failed_; }
  int skipped() const { return skipped_; }

 private:
  void facts();
  // GET /v1/models: model_ and max_model_len_ from its first entry; false (unchanged) if none.
  bool read_models(HttpReply* reply = nullptr);
  void deployment();  // verify_deployment.cpp
  void auth();
  void chat_and_completions();
  void tool_calls();  // verify_chat_template.cpp
  void reasoning();   // verify_chat_template.cpp
  void streaming();
  void stop_strings();
  void resend();
  void metrics();
  void batched_equals_sequential();
  void offload() { offload_check(""); }
  void bad_request();
  void cancel();

  const OpenAiClient* client_ = nullptr;
  std::string model_;           // from /v1/models ("" if that failed)
  int64_t max_model_len_ = -1;  // from /v1/models (-1 if it had none)
  bool reachable_ = true;       // false when GET /health got no answer at all
  bool defer_offload_ = false;  // defer_offload_to_a_small_pool()
  int64_t small_pool_mb_ = 0;
  int passed_ = 0, failed_ = 0, skipped_ = 0;
};

}  // namespace syv::cli
