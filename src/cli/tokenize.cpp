// `syv tokenize --model DIR (--text T | --text-file F)`: prints the ids as a JSON array.
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

struct TokenizeOptions {
  std::string model_dir;
  std::string text;
  std::string text_file;
  bool no_special = false;
};

CommandRegistration reg{
    "tokenize", "Print the token ids of a text as a JSON array", [](CLI::App& app) {
      auto opts = std::make_shared<TokenizeOptions>();
      app.add_option("--model", opts->model_dir, "Model folder with tokenizer.json")->required();
      auto* text = app.add_option("--text", opts->text, "Text to encode");
      auto* file = app.add_option("--text-file", opts->text_file, "File whose bytes to encode");
      text->excludes(file);
      file->excludes(text);
      app.add_flag("--no-special-tokens", opts->no_special,
                   "Do not add BOS/EOS even if tokenizer_config.json asks for them");
      return [opts, text, file]() -> int {
        if (text->count() == 0 && file->count() == 0) {
          return fail("tokenize: give --text or --text-file");
        }
        std::string input = opts->text;
        if (file->count() > 0) {
          std::ifstream in(opts->text_file, std::ios::binary);
          if (!in) return fail("--text-file " + opts->text_file + ": cannot open");
          std::ostringstream ss;
          ss << in.rdbuf();
          input = ss.str();
        }
        auto tokenizer = Tokenizer::load(opts->model_dir);
        if (!tokenizer.ok()) return fail(tokenizer.message());
        const auto ids = tokenizer.value()->encode(input, !opts->no_special);
        std::cout << nlohmann::json(ids).dump() << "\n";
        return 0;
      };
    }};

}  // namespace
}  // namespace syv::cli
