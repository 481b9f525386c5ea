// `syv chat-template`: renders a model's chat template for a conversation and prints the prompt
// exactly (no newline added), like transformers' apply_chat_template(..., tokenize=False).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/command.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

struct Options {
  std::string model_dir;
  std::string messages_file;
  std::string tools_file;
  bool add_generation_prompt = false;
  std::string template_kwargs;
};

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// Parses a JSON file keeping key order (tojson prints dicts in insertion order).
Result<nlohmann::ordered_json> read_json(const std::string& path, const char* what) {
  std::string text;
  if (!read_file(path, &text))
    return Status::Error(std::string(what) + " " + path + ": cannot read the file");
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(std::string(what) + " " + path + ": not valid JSON: " + e.what());
  }
}

int run(const Options& o) {
  // Inputs first, so a bad file fails fast (loading the tokenizer takes a while).
  auto messages = read_json(o.messages_file, "--messages-file");
  if (!messages.ok()) return fail(messages.message());
  if (!messages->is_array())
    return fail("--messages-file " + o.messages_file +
                ": expected a JSON array of messages, found " + messages->type_name());
  nlohmann::ordered_json tools;  // null: no tools
  if (!o.tools_file.empty()) {
    auto t = read_json(o.tools_file, "--tools-file");
    if (!t.ok()) return fail(t.message());
    if (!t->is_array())
      return fail("--tools-file " + o.tools_file + ": expected a JSON array of tools, found " +
                  t->type_name());
    tools = std::move(*t);
  }
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (!o.template_kwargs.empty()) {
    try {
      kwargs = nlohmann::ordered_json::parse(o.template_kwargs);
    } catch (const nlohmann::json::exception& e) {
      return fail(std::string("--template-kwargs: not valid JSON: ") + e.what(),
                  "example: --template-kwargs '{\"enable_thinking\": false}'");
    }
    if (!kwargs.is_object())
      return fail(std::string("--template-kwargs: expected a JSON object, found ") +
                  kwargs.type_name());
  }
  auto tokenizer = Tokenizer::load(o.model_dir);
  if (!tokenizer.ok()) return fail(tokenizer.message());
  // Like transformers, <model>/chat_template.jinja takes precedence over tokenizer_config.json.
  std::string source;
  std::filesystem::path jinja_file = std::filesystem::path(o.model_dir) / "chat_template.jinja";
  if (std::filesystem::exists(jinja_file)) {
    if (!read_file(jinja_file.string(), &source))
      return fail(jinja_file.string() + ": cannot read the file");
  } else {
    source = (*tokenizer)->chat_template();
    if (source.empty())
      return fail(o.model_dir +
                  ": no chat template (no chat_template.jinja, and tokenizer_config.json has no "
                  "\"chat_template\")");
  }
  auto tmpl = ChatTemplate::parse(source);
  if (!tmpl.ok()) return fail(tmpl.message());

  auto prompt = tmpl->render(*messages, tools, o.add_generation_prompt, kwargs,
                             (*tokenizer)->bos_token(), (*tokenizer)->eos_token());
  if (!prompt.ok()) return fail(prompt.message());
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  std::fflush(stdout);
  return 0;
}

CommandRegistration reg{
    "chat-template",
    "Render a model's chat template for a conversation (prints the prompt exactly)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--model", o->model_dir,
                     "Model folder (tokenizer_config.json, optional chat_template.jinja)")
          ->required();
      app.add_option("--messages-file", o->messages_file,
                     "JSON file: array of {role, content, ...} messages")
          ->required();
      app.add_option("--tools-file", o->tools_file, "JSON file: array of tool definitions");
      app.add_flag("--add-generation-prompt", o->add_generation_prompt,
                   "Append the assistant turn opener");
      app.add_option(
          "--template-kwargs", o->template_kwargs,
          "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
      return [o]() { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
