// POST /v1/responses (OpenAI's Responses API) as a chat request: the body is checked against its
// field table (request_fields.h), its `input` items and `instructions` become chat messages, its
// flat function tools, `tool_choice`, `text.format` and `max_output_tokens` the chat route's
// fields, and the result goes through parse_chat_request, so sampling, structured outputs, forced
// tool calls and the template behave exactly as on /v1/chat/completions. Errors name the
// Responses field (`input[2].content[0].type`, `text.format.schema`, `max_output_tokens`), never
// the chat field it was mapped to.
//
//   input item                         chat message
//   "text" (input as a string)         {"role": "user", "content": "text"}
//   {"type": "message", role, content} {role, content}: input_text / output_text / refusal parts
//                                      joined; developer -> system
//   {"type": "function_call", ...}     an assistant message's tool_calls entry (consecutive calls,
//                                      and calls right after an assistant message, share it)
//   {"type": "function_call_output"}   {"role": "tool", "tool_call_id": call_id, "content": output}
//   {"type": "reasoning", content}     reasoning_content of the next assistant message
//
//   {"type": "item_reference", "id"}   the kept item of that id (an earlier response's output or
//                                      input item), read as if it had been sent
//
// Keys inside items other than those read (id, status, annotations, ...) are what clients echo of
// earlier output and are not checked; item types and content part types syv cannot read (images,
// files, built-in tool calls) and references to no kept item are 400s naming them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/openai_schema.h"
#include "server/responses_store.h"

namespace syv::server {

struct ResponsesRequest {
  ChatRequest chat;  // the request as the chat route runs it (messages include the history)
  // This request's input as chat messages (instructions excluded, history excluded): what a
  // stored response adds to the conversation before its output.
  nlohmann::ordered_json input_messages = nlohmann::ordered_json::array();
  // The conversation before this request (previous_response_id), as chat messages.
  nlohmann::ordered_json history = nlohmann::ordered_json::array();
  // The Responses items of the prompt (responses_items.h): the previous response's input items
  // and output, then this request's input, each with an id.
  nlohmann::ordered_json input_items = nlohmann::ordered_json::array();
  // The request fields the response object repeats: instructions, max_output_tokens, metadata,
  // parallel_tool_calls, previous_response_id, reasoning, store, temperature, text, tool_choice,
  // tools, top_logprobs, top_p, truncation, user, background.
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();
  bool store = true;  // false: the response is not kept for previous_response_id
  // truncation "auto": where the conversation does not fit the context, its oldest turns are
  // dropped (OpenAI: items from the beginning), the instructions and the last user turn kept.
  bool truncate_auto = false;
  bool logprobs = false;  // include "message.output_text.logprobs" (or top_logprobs > 0)
};

// The stored response of an id (its conversation: messages, instructions excluded; its input
// items), or nullopt when the id is unknown or expired.
using ConversationLookup = std::function<std::optional<StoredResponse>(const std::string&)>;
// A kept item by its id (ResponsesStore::item), for input items {"type": "item_reference", "id"}.
using ItemLookup = std::function<std::optional<nlohmann::ordered_json>(const std::string&)>;

// `body` and `ordered` are the same request body (ordered keeps key order, so a JSON Schema's
// properties keep theirs in the output). `lookup` finds previous_response_id; `items` resolves
// item references (null: they are refused).
ApiResult<ResponsesRequest> parse_responses_request(const nlohmann::json& body,
                                                    const nlohmann::ordered_json& ordered,
                                                    const SchemaLimits& limits,
                                                    const ConversationLookup& lookup,
                                                    const ItemLookup& items = nullptr);

}  // namespace syv::server
