#include "tokenizer/chat_template.h"

#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/renderer.h"

namespace syv {
namespace {

Status position_error(const jinja::Error& e) {
  if (!e.pos.known()) return Status::Error(std::string("chat template: ") + e.what());
  return Status::Error("chat template line " + std::to_string(e.pos.line) + ", column " +
                       std::to_string(e.pos.column) + ": " + e.what());
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  ChatTemplate t;
  t.source_ = source;
  try {
    t.template_ = std::make_shared<const jinja::Template>(jinja::parse_template(source));
  } catch (const jinja::Error& e) {
    return position_error(e);
  }
  return t;
}

Result<std::string> ChatTemplate::render_context(const nlohmann::ordered_json& context,
                                                 uint64_t max_steps) const {
  if (!context.is_object())
    return Status::Error("chat template: the context must be a JSON object");
  jinja::RenderLimits limits;
  if (max_steps > 0) limits.max_steps = max_steps;
  try {
    jinja::Dict vars;
    for (auto it = context.begin(); it != context.end(); ++it)
      vars.set(it.key(), jinja::Value::from_json(it.value()));
    jinja::Renderer renderer(*template_, limits, jinja::Clock{fixed_local_time_});
    return renderer.render(vars);
  } catch (const jinja::Error& e) {
    return position_error(e);
  }
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages,
                                         const nlohmann::ordered_json& tools,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra_kwargs,
                                         const std::string& bos_token,
                                         const std::string& eos_token) const {
  if (!messages.is_array())
    return Status::Error("chat template: messages must be a JSON array, found " +
                         std::string(messages.type_name()));
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object())
    return Status::Error("chat template: template kwargs must be a JSON object, found " +
                         std::string(extra_kwargs.type_name()));
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  if (extra_kwargs.is_object()) {
    for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) {
      if (it.key() == "messages" || it.key() == "tools" || it.key() == "add_generation_prompt")
        return Status::Error("chat template: template kwargs may not set '" + it.key() + "'");
      context[it.key()] = it.value();
    }
  }
  return render_context(context);
}

Result<std::string> ChatTemplate::render(const nlohmann::json& messages,
                                         const nlohmann::json& tools, bool add_generation_prompt,
                                         const nlohmann::json& extra_kwargs,
                                         const std::string& bos_token,
                                         const std::string& eos_token) const {
  auto ordered = [](const nlohmann::json& j) { return nlohmann::ordered_json::parse(j.dump()); };
  return render(ordered(messages), ordered(tools), add_generation_prompt, ordered(extra_kwargs),
                bos_token, eos_token);
}

}  // namespace syv
