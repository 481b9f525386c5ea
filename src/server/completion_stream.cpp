#include "server/completion_stream.h"

#include <algorithm>

#include "server/generator.h"

namespace syv::server {

using nlohmann::json;

namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

json byte_array(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

CompletionStream::CompletionStream(StreamSetup setup,
                                   std::vector<std::shared_ptr<RequestHandle>> handles,
                                   Generator& generator, const Tokenizer& tokenizer,
                                   Metrics& metrics)
    : setup_(std::move(setup)),
      handles_(std::move(handles)),
      handle_done_(handles_.size(), false),
      cached_tokens_(handles_.size(), 0),
      prompt_lps_(handles_.size()),
      prompt_scored_(handles_.size(), false),
      generator_(generator),
      tokenizer_(tokenizer),
      metrics_(metrics) {
  choices_.reserve(handles_.size() * static_cast<size_t>(setup_.n));
  for (size_t i = 0; i < handles_.size() * static_cast<size_t>(setup_.n); ++i) {
    Choice c;
    c.reasoning = ReasoningParser(setup_.start_in_reasoning);
    // Completions: every choice repeats its prompt's logprobs; chat: choice 0 carries them.
    c.opened = setup_.chat ? !(i == 0 && setup_.prompt_logprobs >= 0)
                           : !(setup_.echo_logprobs || setup_.prompt_logprobs >= 0);
    choices_.push_back(std::move(c));
  }
}

CompletionStream::~CompletionStream() {
  if (finished()) return;
  // The client went away (or the request failed) before the end: the engine aborts the rest.
  cancel();
  for (const Choice& c : choices_) {
    if (!c.finished) metrics_.count_finish("abort");
  }
}

bool CompletionStream::finished() const {
  for (const Choice& c : choices_) {
    if (!c.finished) return false;
  }
  return true;
}

void CompletionStream::cancel() {
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (!handle_done_[i]) generator_.cancel(*handles_[i]);
  }
}

std::string CompletionStream::token_text(int32_t id) const {
  return tokenizer_.decode({id}, /*skip_special_tokens=*/false);
}

json CompletionStream::chunk_base() const {
  return {{"id", setup_.id},
          {"object", setup_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", setup_.created},
          {"model", setup_.model}};
}

json CompletionStream::chat_delta_chunk(int index, const json& delta, const json& logprobs,
                                        const std::string& finish_reason) const {
  json chunk = chunk_base();
  json choice = {{"index", index}, {"delta", delta}, {"logprobs", logprobs}};
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  chunk["choices"] = json::array({choice});
  if (setup_.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json CompletionStream::completion_chunk(int index, const std::string& text, const json& logprobs,
                                        const std::string& finish_reason) const {
  json chunk = chunk_base();
  json choice = {{"index", index}, {"text", text}, {"logprobs", logprobs}};
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  chunk["choices"] = json::array({choice});
  if (setup_.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

std::vector<json> CompletionStream::opening_chunks() {
  std::vector<json> out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const int index = static_cast<int>(i);
    if (setup_.chat) {
      out.push_back(chat_delta_chunk(index, {{"role", "assistant"}, {"content", ""}}, nullptr, ""));
    } else if (!setup_.echo.empty() && !setup_.echo_logprobs) {  // else with its logprobs
      out.push_back(
          completion_chunk(index, setup_.echo[i / static_cast<size_t>(setup_.n)], nullptr, ""));
    }
  }
  return out;
}

void CompletionStream::handle_event(size_t prompt, Event& event, std::vector<json>* chunks) {
  if (event.sample_index < 0 || event.sample_index >= setup_.n) return;
  const size_t index =
      prompt * static_cast<size_t>(setup_.n) + static_cast<size_t>(event.sample_index);
  Choice& c = choices_[index];
  if (c.finished) return;
  if (event.cached_tokens > cached_tokens_[prompt]) cached_tokens_[prompt] = event.cached_tokens;
  if (!event.prompt_logprobs.empty()) prompt_lps_[prompt] = std::move(event.prompt_logprobs);
  if (event.sample_index == 0) prompt_scored_[prompt] = true;
  std::vector<json> out;  // this event's chunks (streaming)

  if (event.token_id >= 0) {
    const auto now = std::chrono::steady_clock::now();
    ++c.completion_tokens;
    metrics_.add_generation_tokens(1);
    if (!first_token_seen_) {
      first_token_seen_ = true;
      metrics_.observe_ttft(seconds_between(setup_.arrival, now));
    }
    if (c.has_token_time) metrics_.observe_inter_token(seconds_between(c.last_token, now));
    c.has_token_time = true;
    c.last_token = now;
  }

  // Logprobs of this token.
  json lp_chunk = nullptr;
  if (setup_.logprobs && event.logprob.has_value() && event.token_id >= 0) {
    const std::string tok = token_text(event.logprob->token_id);
    if (setup_.chat) {
      json top = json::array();
      for (const TokenLogprob& alt : event.top_logprobs) {
        const std::string t = token_text(alt.token_id);
        top.push_back({{"token", t}, {"logprob", alt.logprob}, {"bytes", byte_array(t)}});
      }
      json entry = {{"token", tok},
                    {"logprob", event.logprob->logprob},
                    {"bytes", byte_array(tok)},
                    {"top_logprobs", top}};
      c.logprobs_content.push_back(entry);
      lp_chunk = {{"content", json::array({entry})}};
    } else {
      json top = json::object();
      for (const TokenLogprob& alt : event.top_logprobs)
        top[token_text(alt.token_id)] = alt.logprob;
      const size_t echo_len =
          setup_.echo.empty() ? 0 : setup_.echo[index / static_cast<size_t>(setup_.n)].size();
      const int offset = static_cast<int>(echo_len + c.text.size());
      c.lp_tokens.push_back(tok);
      c.lp_values.push_back(event.logprob->logprob);
      c.lp_top.push_back(top);
      c.lp_offsets.push_back(offset);
      lp_chunk = {{"tokens", json::array({tok})},
                  {"token_logprobs", json::array({event.logprob->logprob})},
                  {"top_logprobs", json::array({top})},
                  {"text_offset", json::array({offset})}};
    }
  }

  const bool finishing = event.finished();
  if (setup_.chat) {
    const bool was_reasoning = c.reasoning.in_reasoning();
    ReasoningParser::Delta r = c.reasoning.feed(event.text);
    // A token of the think block: inside it before or after (so both tags count).
    if (event.token_id >= 0 && (was_reasoning || c.reasoning.in_reasoning())) ++c.reasoning_tokens;
    if (finishing) {
      ReasoningParser::Delta tail = c.reasoning.finish();
      r.reasoning += tail.reasoning;
      r.content += tail.content;
    }
    std::string content = std::move(r.content);
    std::vector<ToolCall> calls;
    if (setup_.parse_tool_calls) {
      ToolCallParser::Delta t = c.tools.feed(content);
      if (finishing) {
        ToolCallParser::Delta tail = c.tools.finish();
        t.content += tail.content;
        for (ToolCall& call : tail.calls) t.calls.push_back(std::move(call));
      }
      content = std::move(t.content);
      calls = std::move(t.calls);
    }
    json delta = json::object();
    if (!r.reasoning.empty()) delta["reasoning_content"] = r.reasoning;
    if (!content.empty()) delta["content"] = content;
    if (!calls.empty()) {
      json list = json::array();
      for (ToolCall& call : calls) {
        list.push_back({{"index", static_cast<int>(c.calls.size())},
                        {"id", call.id},
                        {"type", "function"},
                        {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        c.calls.push_back(std::move(call));
      }
      delta["tool_calls"] = list;
    }
    c.reasoning_text += r.reasoning;
    c.text += content;
    if (chunks != nullptr && (!delta.empty() || !lp_chunk.is_null())) {
      out.push_back(chat_delta_chunk(static_cast<int>(index), delta, lp_chunk, ""));
    }
  } else {
    c.text += event.text;
    if (chunks != nullptr && (!event.text.empty() || !lp_chunk.is_null())) {
      out.push_back(completion_chunk(static_cast<int>(index), event.text, lp_chunk, ""));
    }
  }

  if (finishing) {
    c.finished = true;
    c.finish_reason = event.finish_reason;
    if (c.finish_reason == "stop" && !c.calls.empty()) c.finish_reason = "tool_calls";
    metrics_.count_finish(c.finish_reason);
    if (chunks != nullptr) {
      out.push_back(
          setup_.chat
              ? chat_delta_chunk(static_cast<int>(index), json::object(), nullptr, c.finish_reason)
              : completion_chunk(static_cast<int>(index), "", nullptr, c.finish_reason));
    }
    if (finished()) {
      metrics_.observe_e2e(seconds_between(setup_.arrival, std::chrono::steady_clock::now()));
    }
  }
  deliver(prompt, index, std::move(out), chunks);
  // Sample 0's first event scores the prompt: the other samples' held chunks may go now.
  if (chunks != nullptr && event.sample_index == 0) {
    for (size_t s = 1; s < static_cast<size_t>(setup_.n); ++s) {
      const size_t other = prompt * static_cast<size_t>(setup_.n) + s;
      if (!choices_[other].opened && !choices_[other].held.empty()) open(prompt, other, chunks);
    }
  }
}

void CompletionStream::deliver(size_t prompt, size_t index, std::vector<json> out,
                               std::vector<json>* chunks) {
  if (chunks == nullptr) return;
  Choice& c = choices_[index];
  if (c.opened) {
    for (json& chunk : out) chunks->push_back(std::move(chunk));
    return;
  }
  for (json& chunk : out) c.held.push_back(std::move(chunk));
  if (prompt_scored_[prompt] && !c.held.empty()) open(prompt, index, chunks);
}

void CompletionStream::open(size_t prompt, size_t index, std::vector<json>* chunks) {
  Choice& c = choices_[index];
  c.opened = true;
  json& first = c.held.front();
  if (setup_.chat) {
    first["prompt_logprobs"] = vllm_prompt_logprobs(prompt);
  } else {
    json& choice = first["choices"][0];
    if (setup_.echo_logprobs) {
      choice["text"] = setup_.echo[prompt] + choice["text"].get<std::string>();
      json lp = {{"tokens", json::array()},
                 {"token_logprobs", json::array()},
                 {"top_logprobs", json::array()},
                 {"text_offset", json::array()}};
      echo_logprobs(prompt, lp);
      if (!choice["logprobs"].is_null()) {
        for (auto& [key, values] : lp.items()) {
          for (json& v : choice["logprobs"][key]) values.push_back(std::move(v));
        }
      }
      choice["logprobs"] = std::move(lp);
    }
    if (setup_.prompt_logprobs >= 0) choice["prompt_logprobs"] = vllm_prompt_logprobs(prompt);
  }
  for (json& chunk : c.held) chunks->push_back(std::move(chunk));
  c.held.clear();
}

bool CompletionStream::pump(std::chrono::milliseconds wait, std::vector<json>* chunks) {
  bool any = false;
  Event event;
  for (size_t i = 0; i < handles_.size(); ++i) {
    while (!handle_done_[i]) {
      const NextStatus st = handles_[i]->try_next(event);
      if (st == NextStatus::kEnd) handle_done_[i] = true;
      if (st != NextStatus::kEvent) break;
      handle_event(i, event, chunks);
      any = true;
    }
  }
  if (!any && !finished()) {
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (handle_done_[i]) continue;
      const NextStatus st = handles_[i]->next(event, wait);
      if (st == NextStatus::kEnd) handle_done_[i] = true;
      if (st == NextStatus::kEvent) handle_event(i, event, chunks);
      break;
    }
  }
  // A request whose channel ended without a finishing event for some sample: treat as aborted.
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (!handle_done_[i]) continue;
    for (int s = 0; s < setup_.n; ++s) {
      Choice& c = choices_[i * static_cast<size_t>(setup_.n) + static_cast<size_t>(s)];
      if (!c.finished) {
        Event abort;
        abort.sample_index = s;
        abort.finish_reason = "abort";
        handle_event(i, abort, chunks);
      }
    }
  }
  return !finished();
}

json CompletionStream::usage() const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (int len : setup_.prompt_lengths) prompt += len;
  for (const Choice& c : choices_) completion += c.completion_tokens;
  for (int n : cached_tokens_) cached += n;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

int64_t CompletionStream::reasoning_tokens() const {
  int64_t n = 0;
  for (const Choice& c : choices_) n += c.reasoning_tokens;
  return n;
}

std::vector<json> CompletionStream::closing_chunks() {
  std::vector<json> out;
  if (closed_) return out;
  closed_ = true;
  if (setup_.include_usage) {
    json chunk = chunk_base();
    chunk["choices"] = json::array();
    chunk["usage"] = usage();
    out.push_back(chunk);
  }
  return out;
}

void CompletionStream::echo_logprobs(size_t prompt, json& lp) const {
  const std::vector<int32_t>& ids = setup_.prompt_ids[prompt];
  const std::vector<PromptLogprob>& scored = prompt_lps_[prompt];
  const size_t echo_len = setup_.echo[prompt].size();
  size_t offset = 0;
  for (size_t p = 0; p < ids.size(); ++p) {
    const std::string tok = token_text(ids[p]);
    lp["tokens"].push_back(tok);
    lp["text_offset"].push_back(std::min(offset, echo_len));
    offset += tok.size();
    if (p == 0 || p > scored.size()) {  // the first token has no logprob
      lp["token_logprobs"].push_back(nullptr);
      lp["top_logprobs"].push_back(nullptr);
      continue;
    }
    const PromptLogprob& e = scored[p - 1];
    lp["token_logprobs"].push_back(e.token.logprob);
    json top = json::object();
    for (size_t k = 0; k < e.top.size() && static_cast<int>(k) < setup_.top_logprobs; ++k)
      top[token_text(e.top[k].token_id)] = e.top[k].logprob;
    lp["top_logprobs"].push_back(top);
  }
}

json CompletionStream::vllm_prompt_logprobs(size_t prompt) const {
  json out = json::array({nullptr});
  for (const PromptLogprob& e : prompt_lps_[prompt]) {
    json entry = json::object();
    entry[std::to_string(e.token.token_id)] = {{"logprob", e.token.logprob},
                                               {"rank", e.rank},
                                               {"decoded_token", token_text(e.token.token_id)}};
    for (size_t k = 0; k < e.top.size() && static_cast<int>(k) < setup_.prompt_logprobs; ++k) {
      const std::string key = std::to_string(e.top[k].token_id);
      if (entry.contains(key)) continue;
      entry[key] = {{"logprob", e.top[k].logprob},
                    {"rank", static_cast<int>(k) + 1},
                    {"decoded_token", token_text(e.top[k].token_id)}};
    }
    out.push_back(std::move(entry));
  }
  return out;
}

json CompletionStream::response() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    if (setup_.chat) {
      json message = {{"role", "assistant"}};
      message["content"] = (c.text.empty() && !c.calls.empty()) ? json(nullptr) : json(c.text);
      if (!c.reasoning_text.empty()) message["reasoning_content"] = c.reasoning_text;
      if (!c.calls.empty()) {
        json list = json::array();
        for (const ToolCall& call : c.calls) {
          list.push_back({{"id", call.id},
                          {"type", "function"},
                          {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        message["tool_calls"] = list;
      }
      json choice = {{"index", i}, {"message", message}, {"finish_reason", c.finish_reason}};
      choice["logprobs"] = setup_.logprobs ? json{{"content", c.logprobs_content}} : json(nullptr);
      choices.push_back(choice);
    } else {
      const std::string echo =
          setup_.echo.empty() ? "" : setup_.echo[i / static_cast<size_t>(setup_.n)];
      json choice = {{"index", i}, {"text", echo + c.text}, {"finish_reason", c.finish_reason}};
      const size_t prompt = i / static_cast<size_t>(setup_.n);
      if (setup_.logprobs) {
        json lp = {{"tokens", json::array()},
                   {"token_logprobs", json::array()},
                   {"top_logprobs", json::array()},
                   {"text_offset", json::array()}};
        if (setup_.echo_logprobs) echo_logprobs(prompt, lp);
        for (size_t t = 0; t < c.lp_tokens.size(); ++t) {
          lp["tokens"].push_back(c.lp_tokens[t]);
          lp["token_logprobs"].push_back(c.lp_values[t]);
          lp["top_logprobs"].push_back(c.lp_top[t]);
          lp["text_offset"].push_back(c.lp_offsets[t]);
        }
        choice["logprobs"] = std::move(lp);
      } else {
        choice["logprobs"] = nullptr;
      }
      if (setup_.prompt_logprobs >= 0) choice["prompt_logprobs"] = vllm_prompt_logprobs(prompt);
      choices.push_back(choice);
    }
  }
  json out = {
      {"id", setup_.id},           {"object", setup_.chat ? "chat.completion" : "text_completion"},
      {"created", setup_.created}, {"model", setup_.model},
      {"choices", choices},        {"usage", usage()}};
  if (setup_.chat && setup_.prompt_logprobs >= 0) out["prompt_logprobs"] = vllm_prompt_logprobs(0);
  return out;
}

}  // namespace syv::server
