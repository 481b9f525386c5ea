// One /v1/chat/completions or /v1/completions request in flight: reads the events of its engine
// requests (one per prompt, each with n samples), turns token text into OpenAI choices
// (reasoning_content, tool_calls, logprobs, finish_reason, usage) and produces either streaming
// chunks or the final response body. Choice index = prompt_index * n + sample_index.
//
// Used by one HTTP thread at a time. Destroying an unfinished stream cancels its requests, so a
// client that goes away frees its pages.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/metrics.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace syv::server {

class Generator;

struct StreamSetup {
  bool chat = true;
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created = 0;  // unix seconds
  int n = 1;
  bool logprobs = false;
  int top_logprobs = 0;
  bool include_usage = false;       // streaming: a last chunk with usage
  bool start_in_reasoning = false;  // chat: the prompt opened a <think> block
  bool parse_tool_calls = false;    // chat: tools were given
  std::vector<std::string> echo;    // completions with echo: the text of each prompt
  std::vector<int> prompt_lengths;  // tokens of each prompt
  // Prompt logprobs: completions with echo and logprobs put the prompt's tokens first in
  // `logprobs` (the first with a null logprob, as OpenAI's legacy API does); prompt_logprobs >= 0
  // (vLLM's field) adds `prompt_logprobs` (completions: per choice; chat: top level). The engine
  // sends them with the first event of each prompt's sample 0. prompt_ids: the prompts' tokens.
  // Streaming, they ride on the first chunk of each choice after its prompt was scored (with echo
  // and logprobs, that chunk also carries the echoed text, as vLLM streams it); a choice's chunks
  // wait until then.
  bool echo_logprobs = false;
  int prompt_logprobs = -1;
  std::vector<std::vector<int32_t>> prompt_ids;
  std::chrono::steady_clock::time_point arrival;
};

class CompletionStream {
 public:
  CompletionStream(StreamSetup setup, std::vector<std::shared_ptr<RequestHandle>> handles,
                   Generator& generator, const Tokenizer& tokenizer, Metrics& metrics);
  ~CompletionStream();
  CompletionStream(const CompletionStream&) = delete;
  CompletionStream& operator=(const CompletionStream&) = delete;

  // Streaming: the first chunks (chat: the assistant role of every choice; completions with echo:
  // the prompts).
  std::vector<nlohmann::json> opening_chunks();
  // Reads what the engine produced, waiting up to `wait` for the first event. Streaming chunks
  // for it are appended to `chunks` (may be null for non-streaming use). Returns false once every
  // sample has finished (the closing chunks are then available).
  bool pump(std::chrono::milliseconds wait, std::vector<nlohmann::json>* chunks);
  // Streaming: the usage chunk (when include_usage). Call after pump() returned false.
  std::vector<nlohmann::json> closing_chunks();
  // Non-streaming: the whole response. Call after pump() returned false.
  nlohmann::json response() const;

  bool finished() const;
  void cancel();  // cancels every engine request that has not finished
  // {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details} so far.
  nlohmann::json usage() const;
  // Chat: of the completion tokens, those of a <think> block (both tags included).
  int64_t reasoning_tokens() const;

 private:
  struct Choice {
    ReasoningParser reasoning;
    ToolCallParser tools;
    std::string text;            // content (chat) or text (completions)
    std::string reasoning_text;  // chat
    std::vector<ToolCall> calls;
    nlohmann::json logprobs_content = nlohmann::json::array();  // chat logprobs.content
    std::vector<std::string> lp_tokens;                         // completions logprobs
    std::vector<float> lp_values;
    nlohmann::json lp_top = nlohmann::json::array();
    std::vector<int> lp_offsets;
    int completion_tokens = 0;
    int reasoning_tokens = 0;
    std::string finish_reason;
    bool finished = false;
    bool has_token_time = false;
    std::chrono::steady_clock::time_point last_token;
    // Streaming: false while the choice's first chunk still owes its prompt's logprobs (and, with
    // echo and logprobs, the echoed text); its chunks wait in `held` until the prompt is scored.
    bool opened = true;
    std::vector<nlohmann::json> held;
  };

  void handle_event(size_t prompt, Event& event, std::vector<nlohmann::json>* chunks);
  // Streaming: passes `out` (the chunks of one event of choice `index`) on, or holds them until
  // the prompt is scored; then the choice's first chunk gets the prompt's part (open()).
  void deliver(size_t prompt, size_t index, std::vector<nlohmann::json> out,
               std::vector<nlohmann::json>* chunks);
  void open(size_t prompt, size_t index, std::vector<nlohmann::json>* chunks);
  nlohmann::json chunk_base() const;
  nlohmann::json chat_delta_chunk(int index, const nlohmann::json& delta,
                                  const nlohmann::json& logprobs,
                                  const std::string& finish_reason) const;
  nlohmann::json completion_chunk(int index, const std::string& text,
                                  const nlohmann::json& logprobs,
                                  const std::string& finish_reason) const;
  std::string token_text(int32_t id) const;
  // The prompt's entries of a completion choice's logprobs (echo with logprobs).
  void echo_logprobs(size_t prompt, nlohmann::json& lp) const;
  // vLLM's prompt_logprobs of a prompt: [null, {"<id>": {logprob, rank, decoded_token}}, ...].
  nlohmann::json vllm_prompt_logprobs(size_t prompt) const;

  StreamSetup setup_;
  std::vector<std::shared_ptr<RequestHandle>> handles_;
  std::vector<bool> handle_done_;
  std::vector<int> cached_tokens_;                      // per prompt
  std::vector<std::vector<PromptLogprob>> prompt_lps_;  // per prompt: positions 1..
  std::vector<bool> prompt_scored_;  // per prompt: sample 0 had its first event (lps known)
  Generator& generator_;
  const Tokenizer& tokenizer_;
  Metrics& metrics_;
  std::vector<Choice> choices_;
  bool first_token_seen_ = false;
  bool closed_ = false;
};

}  // namespace syv::server
