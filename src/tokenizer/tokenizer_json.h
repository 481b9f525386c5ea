// Fast reader of tokenizer.json. The vocabulary and merges (hundreds of thousands of entries) are
// streamed out of the SAX events straight into vectors; the rest of the file becomes a normal
// nlohmann::json DOM. Building a DOM for the vocabulary as well would double the load time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace syv {

struct TokenizerJson {
  nlohmann::json root;  // the whole file except model.vocab and model.merges
  bool has_vocab = false;
  std::vector<std::pair<std::string, int32_t>> vocab;  // model.vocab entries in file order
  bool has_merges = false;
  // model.merges in rank order, from "a b" strings ("#version" lines skipped) or ["a", "b"].
  std::vector<std::pair<std::string, std::string>> merges;
};

// Errors name the field: "model.merges[3]: expected ...", "model.vocab["x"]: expected ...".
Result<TokenizerJson> parse_tokenizer_json(const std::string& text);

}  // namespace syv
