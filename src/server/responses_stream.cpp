#include "server/responses_stream.h"

#include "server/random_id.h"

namespace syv::server {

using nlohmann::json;
using nlohmann::ordered_json;

ResponsesStream::ResponsesStream(ResponsesSetup setup, std::shared_ptr<CompletionStream> chat)
    : setup_(std::move(setup)), chat_(std::move(chat)) {}

ordered_json ResponsesStream::event(const char* type) {
  return {{"type", type}, {"sequence_number", sequence_++}};
}

void ResponsesStream::emit(Events events, ordered_json e) const {
  if (events != nullptr) events->push_back(std::move(e));
}

std::vector<ordered_json> ResponsesStream::opening_events() {
  std::vector<ordered_json> out;
  for (const char* type : {"response.created", "response.in_progress"}) {
    ordered_json e = event(type);
    e["response"] = response();
    out.push_back(std::move(e));
  }
  return out;
}

ordered_json ResponsesStream::text_part(const Item& item) const {
  if (item.kind == "reasoning") return {{"type", "reasoning_text"}, {"text", item.text}};
  ordered_json part = {
      {"type", "output_text"}, {"text", item.text}, {"annotations", ordered_json::array()}};
  if (setup_.logprobs) part["logprobs"] = item.logprobs;
  return part;
}

void ResponsesStream::open_text_item(const std::string& kind, Events events) {
  if (open_ >= 0 && items_[static_cast<size_t>(open_)].kind == kind) return;
  close_text_item("completed", events);
  Item item;
  item.kind = kind;
  if (kind == "message") {
    item.json = {{"id", random_id("msg_")},
                 {"type", "message"},
                 {"status", "in_progress"},
                 {"role", "assistant"},
                 {"content", ordered_json::array()}};
  } else {
    item.json = {{"id", random_id("rs_")},
                 {"type", "reasoning"},
                 {"summary", ordered_json::array()},
                 {"content", ordered_json::array()}};
  }
  items_.push_back(std::move(item));
  open_ = static_cast<int>(items_.size()) - 1;
  const Item& it = items_.back();
  ordered_json added = event("response.output_item.added");
  added["output_index"] = open_;
  added["item"] = it.json;
  emit(events, std::move(added));
  ordered_json part = event("response.content_part.added");
  part["item_id"] = it.json["id"];
  part["output_index"] = open_;
  part["content_index"] = 0;
  part["part"] = text_part(it);
  emit(events, std::move(part));
}

void ResponsesStream::close_text_item(const std::string& status, Events events) {
  if (open_ < 0) return;
  Item& it = items_[static_cast<size_t>(open_)];
  const bool message = it.kind == "message";
  ordered_json done = event(message ? "response.output_text.done" : "response.reasoning_text.done");
  done["item_id"] = it.json["id"];
  done["output_index"] = open_;
  done["content_index"] = 0;
  done["text"] = it.text;
  if (message && setup_.logprobs) done["logprobs"] = it.logprobs;
  emit(events, std::move(done));
  ordered_json part = event("response.content_part.done");
  part["item_id"] = it.json["id"];
  part["output_index"] = open_;
  part["content_index"] = 0;
  part["part"] = text_part(it);
  emit(events, std::move(part));
  it.json["content"] = ordered_json::array({text_part(it)});
  if (message) it.json["status"] = status;
  ordered_json item_done = event("response.output_item.done");
  item_done["output_index"] = open_;
  item_done["item"] = it.json;
  emit(events, std::move(item_done));
  open_ = -1;
}

void ResponsesStream::text_delta(const std::string& kind, const std::string& text,
                                 const ordered_json& logprobs, Events events) {
  open_text_item(kind, events);
  Item& it = items_[static_cast<size_t>(open_)];
  it.text += text;
  const bool message = kind == "message";
  ordered_json e = event(message ? "response.output_text.delta" : "response.reasoning_text.delta");
  e["item_id"] = it.json["id"];
  e["output_index"] = open_;
  e["content_index"] = 0;
  e["delta"] = text;
  if (message && setup_.logprobs) {
    for (const ordered_json& lp : logprobs) it.logprobs.push_back(lp);
    e["logprobs"] = logprobs;
  }
  emit(events, std::move(e));
}

void ResponsesStream::function_call(const json& call, Events events) {
  close_text_item("completed", events);
  const json& fn = call["function"];
  Item item;
  item.kind = "function_call";
  item.json = {{"id", random_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"},
               {"arguments", ""},        {"call_id", call["id"]},   {"name", fn["name"]}};
  items_.push_back(item);
  const int index = static_cast<int>(items_.size()) - 1;
  ordered_json added = event("response.output_item.added");
  added["output_index"] = index;
  added["item"] = item.json;
  emit(events, std::move(added));
  ordered_json delta = event("response.function_call_arguments.delta");
  delta["item_id"] = item.json["id"];
  delta["output_index"] = index;
  delta["delta"] = fn["arguments"];
  emit(events, std::move(delta));
  ordered_json done = event("response.function_call_arguments.done");
  done["item_id"] = item.json["id"];
  done["output_index"] = index;
  done["name"] = fn["name"];
  done["arguments"] = fn["arguments"];
  emit(events, std::move(done));
  Item& stored = items_.back();
  stored.json["arguments"] = fn["arguments"];
  stored.json["status"] = "completed";
  ordered_json item_done = event("response.output_item.done");
  item_done["output_index"] = index;
  item_done["item"] = stored.json;
  emit(events, std::move(item_done));
}

void ResponsesStream::handle_chunk(const json& chunk, Events events) {
  const json& choice = chunk["choices"][0];
  const json& delta = choice["delta"];
  ordered_json logprobs = ordered_json::array();
  if (choice["logprobs"].is_object()) {
    for (const json& lp : choice["logprobs"]["content"]) logprobs.push_back(ordered_json(lp));
  }
  if (delta.contains("reasoning_content")) {
    text_delta("reasoning", delta["reasoning_content"].get<std::string>(), {}, events);
  }
  if (delta.contains("content")) {
    // Logprobs held back from tokens whose text the parsers withheld go with the next text.
    ordered_json all = pending_logprobs_;
    for (const ordered_json& lp : logprobs) all.push_back(lp);
    pending_logprobs_ = ordered_json::array();
    text_delta("message", delta["content"].get<std::string>(), all, events);
  } else if (!delta.contains("reasoning_content") && !delta.contains("tool_calls")) {
    for (const ordered_json& lp : logprobs) pending_logprobs_.push_back(lp);
  }
  if (delta.contains("tool_calls")) {
    for (const json& call : delta["tool_calls"]) function_call(call, events);
  }
  if (choice["finish_reason"].is_string()) finish_reason_ = choice["finish_reason"];
}

void ResponsesStream::end(Events events) {
  const char* terminal = "response.completed";
  if (finish_reason_ == "length") {
    status_ = "incomplete";
    incomplete_details_ = {{"reason", "max_output_tokens"}};
    terminal = "response.incomplete";
  } else if (finish_reason_ == "abort" || finish_reason_.empty()) {
    status_ = "failed";
    error_ = {
        {"code", "server_error"},
        {"message", "the generation was aborted before its end (the server is shutting down)"}};
    terminal = "response.failed";
  } else {
    status_ = "completed";
  }
  close_text_item(status_ == "completed" ? "completed" : "incomplete", events);
  ended_ = true;
  ordered_json e = event(terminal);
  e["response"] = response();
  emit(events, std::move(e));
}

bool ResponsesStream::pump(std::chrono::milliseconds wait, Events events) {
  if (ended_) return false;
  std::vector<json> chunks;
  const bool more = chat_->pump(wait, &chunks);
  for (const json& chunk : chunks) handle_chunk(chunk, events);
  if (!more) end(events);
  return more;
}

ordered_json ResponsesStream::usage() const {
  const json u = chat_->usage();
  return {
      {"input_tokens", u["prompt_tokens"]},
      {"input_tokens_details", {{"cached_tokens", u["prompt_tokens_details"]["cached_tokens"]}}},
      {"output_tokens", u["completion_tokens"]},
      {"output_tokens_details", {{"reasoning_tokens", chat_->reasoning_tokens()}}},
      {"total_tokens", u["total_tokens"]}};
}

ordered_json ResponsesStream::response() const {
  ordered_json output = ordered_json::array();
  for (const Item& it : items_) output.push_back(it.json);
  ordered_json r = {
      {"id", setup_.id},       {"object", "response"}, {"created_at", setup_.created_at},
      {"status", status_},     {"error", error_},      {"incomplete_details", incomplete_details_},
      {"model", setup_.model}, {"output", output}};
  for (const auto& [key, value] : setup_.echo.items()) r[key] = value;
  r["usage"] = ended_ ? usage() : ordered_json();
  return r;
}

ordered_json ResponsesStream::output_message() const {
  std::string content, reasoning;
  ordered_json calls = ordered_json::array();
  for (const Item& it : items_) {
    if (it.kind == "message") content += it.text;
    if (it.kind == "reasoning") reasoning += it.text;
    if (it.kind == "function_call") {
      calls.push_back(
          {{"id", it.json["call_id"]},
           {"type", "function"},
           {"function", {{"name", it.json["name"]}, {"arguments", it.json["arguments"]}}}});
    }
  }
  ordered_json m = {{"role", "assistant"}, {"content", content}};
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = calls;
  return m;
}

}  // namespace syv::server
