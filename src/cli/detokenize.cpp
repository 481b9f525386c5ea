// `syv detokenize --model DIR --tokens 1,2,3`: prints the decoded text.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

struct DetokenizeOptions {
  std::string model_dir;
  std::string tokens;
  bool skip_special = false;
  bool json = false;
};

// Accepts "1,2,3", "1 2 3" and "[1, 2, 3]".
Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string item;
  auto flush = [&]() -> Status {
    if (item.empty()) return Status::Ok();
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || value < INT32_MIN || value > INT32_MAX) {
      return Status::Error("--tokens: expected integer ids separated by commas, found \"" + item +
                           "\"");
    }
    ids.push_back(static_cast<int32_t>(value));
    item.clear();
    return Status::Ok();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']') {
      SYV_RETURN_IF_ERROR(flush());
    } else {
      item += c;
    }
  }
  SYV_RETURN_IF_ERROR(flush());
  return ids;
}

CommandRegistration reg{
    "detokenize", "Print the text of comma-separated token ids", [](CLI::App& app) {
      auto opts = std::make_shared<DetokenizeOptions>();
      app.add_option("--model", opts->model_dir, "Model folder with tokenizer.json")->required();
      app.add_option("--tokens", opts->tokens, "Token ids, e.g. 9707,1879")->required();
      app.add_flag("--skip-special-tokens", opts->skip_special, "Leave out special tokens");
      app.add_flag("--json", opts->json, "Print the text as a JSON string");
      return [opts]() -> int {
        auto ids = parse_ids(opts->tokens);
        if (!ids.ok()) return fail(ids.message());
        auto tokenizer = Tokenizer::load(opts->model_dir);
        if (!tokenizer.ok()) return fail(tokenizer.message());
        const std::string text = tokenizer.value()->decode(ids.value(), opts->skip_special);
        if (opts->json) {
          std::cout << nlohmann::json(text).dump() << "\n";
        } else {
          std::cout << text << "\n";
        }
        return 0;
      };
    }};

}  // namespace
}  // namespace syv::cli
