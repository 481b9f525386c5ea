// One /v1/responses request in flight: reads the chat chunks of its CompletionStream (one prompt,
// n = 1) and builds the Responses API's output items and events from them:
//
//   response.created, response.in_progress                       (opening_events)
//   per text item (reasoning, then the message):
//     response.output_item.added, response.content_part.added,
//     response.reasoning_text.delta | response.output_text.delta ...,
//     response.reasoning_text.done  | response.output_text.done,
//     response.content_part.done, response.output_item.done
//   per tool call: response.output_item.added (function_call), response.function_call_arguments
//     .delta (the whole arguments: the chat path emits a call once its block is closed), .done,
//     response.output_item.done
//   response.completed | response.incomplete (max_output_tokens) | response.failed (aborted)
//
// Every event carries "type" and "sequence_number" (0, 1, ...). The response object (response())
// is the same whether the request streamed or not: non-streaming requests build it from the same
// events, then drop them.
//
// Used by one HTTP thread at a time, like CompletionStream.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/completion_stream.h"

namespace syv::server {

struct ResponsesSetup {
  std::string id;  // "resp_..."
  std::string model;
  int64_t created_at = 0;       // unix seconds
  nlohmann::ordered_json echo;  // the request fields the object repeats (ResponsesRequest::echo)
  bool logprobs = false;        // output_text parts carry logprobs
};

class ResponsesStream {
 public:
  ResponsesStream(ResponsesSetup setup, std::shared_ptr<CompletionStream> chat);

  // response.created and response.in_progress (streaming).
  std::vector<nlohmann::ordered_json> opening_events();
  // Reads what the engine produced (CompletionStream::pump), appending the events it makes to
  // `events` (may be null). Returns false once the response has ended; the terminal event was
  // then the last one appended.
  bool pump(std::chrono::milliseconds wait, std::vector<nlohmann::ordered_json>* events);

  // The response object as it stands (usage once ended).
  nlohmann::ordered_json response() const;
  // The output as one assistant chat message (content, reasoning_content, tool_calls): what a
  // stored response adds to its conversation.
  nlohmann::ordered_json output_message() const;
  // "in_progress", "completed", "incomplete" or "failed".
  const std::string& status() const { return status_; }

  bool finished() const { return ended_; }
  void cancel() { chat_->cancel(); }
  const CompletionStream& chat() const { return *chat_; }

 private:
  struct Item {
    std::string kind;  // "message", "reasoning", "function_call"
    nlohmann::ordered_json json;
    std::string text;  // message / reasoning text so far
    nlohmann::ordered_json logprobs = nlohmann::ordered_json::array();
  };
  using Events = std::vector<nlohmann::ordered_json>*;

  nlohmann::ordered_json event(const char* type);
  void emit(Events events, nlohmann::ordered_json e) const;
  void handle_chunk(const nlohmann::json& chunk, Events events);
  void text_delta(const std::string& kind, const std::string& text,
                  const nlohmann::ordered_json& logprobs, Events events);
  void open_text_item(const std::string& kind, Events events);
  void close_text_item(const std::string& status, Events events);
  void function_call(const nlohmann::json& call, Events events);
  void end(Events events);
  nlohmann::ordered_json text_part(const Item& item) const;
  nlohmann::ordered_json usage() const;

  ResponsesSetup setup_;
  std::shared_ptr<CompletionStream> chat_;
  std::vector<Item> items_;
  int open_ = -1;  // the text item receiving deltas, -1 when none
  nlohmann::ordered_json pending_logprobs_ = nlohmann::ordered_json::array();
  std::string finish_reason_;
  std::string status_ = "in_progress";
  nlohmann::ordered_json incomplete_details_;
  nlohmann::ordered_json error_;
  int64_t sequence_ = 0;
  bool ended_ = false;
};

}  // namespace syv::server
