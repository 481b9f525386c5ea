// Fuzzes the structured-output front-ends and the grammar engine. The first byte picks what the
// rest is: GBNF text, a JSON Schema (JSON text), a regex, or a choice list (lines). Whatever
// compiles is then run: a matcher over a small fixed vocabulary (every single byte plus a few
// multi-byte strings) takes the first allowed token up to 48 times, and every allowed token must
// be accepted; the token a mask refuses must be refused. Failures must be errors naming their
// source ("grammar line ...", "json schema ...", "regex at offset ...", "choice list ..."); never
// a crash, a sanitizer report, a hang or an exception.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/choice.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace {

using syv::grammar::Grammar;
using syv::grammar::GrammarSession;
using syv::grammar::Matcher;
using syv::grammar::TokenTrie;

const std::shared_ptr<const TokenTrie>& trie() {
  static const std::shared_ptr<const TokenTrie> t = [] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"{\"", "\":", "\",", "true", "false", "null", "é", "東京", "  ", "\n ",
                          "ab", "abc", "0.5", "-1", "[]", "{}", "\\\"", "\\u00", "😀"})
      v.push_back(s);
    v.push_back("");  // a special token
    return std::make_shared<const TokenTrie>(std::move(v));
  }();
  return t;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

void run(const std::shared_ptr<const Grammar>& g) {
  auto session = std::make_shared<GrammarSession>(g, trie(), size_t{4} << 20);
  Matcher m(session);
  for (int step = 0; step < 48; ++step) {
    const std::vector<uint64_t> mask = m.allowed_tokens();
    int32_t first = -1, refused = -1;
    for (int32_t t = 0; t < trie()->vocab_size(); ++t) {
      const bool on = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1u;
      if (on && first < 0) first = t;
      if (!on && refused < 0 && !trie()->bytes(t).empty()) refused = t;
    }
    if (refused >= 0) {
      Matcher copy = m;
      if (copy.accept_token(refused)) __builtin_trap();  // the mask refused it
    }
    if (first < 0) return;
    if (!m.accept_token(first)) __builtin_trap();  // the mask allowed it
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 16 * 1024) return 0;
  const int mode = data[0] % 4;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  syv::Result<std::string> gbnf = std::string();
  const char* source = "grammar";
  if (mode == 0) {
    gbnf = text;
  } else if (mode == 1) {
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(text);
    } catch (const std::exception&) {
      return 0;
    }
    gbnf = syv::grammar::json_schema_to_gbnf(schema);
    source = "json schema";
  } else if (mode == 2) {
    gbnf = syv::grammar::regex_to_gbnf(text);
    source = "regex";
  } else {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    gbnf = syv::grammar::choice_gbnf(lines);
    source = "choice list";
  }
  if (!gbnf.ok()) {
    if (!starts_with(gbnf.message(), source)) __builtin_trap();
    return 0;
  }
  auto g = Grammar::parse(gbnf.value());
  if (!g.ok()) {
    // Front-ends must emit grammars that compile (a user's GBNF may be wrong).
    if (mode != 0) {
      if (!starts_with(g.message(), "grammar")) __builtin_trap();
      // A repetition the grammar cannot expand (too large) is an honest refusal too.
      if (g.message().find("too large") == std::string::npos &&
          g.message().find("repetition") == std::string::npos)
        __builtin_trap();
    }
    if (!starts_with(g.message(), "grammar")) __builtin_trap();
    return 0;
  }
  run(g.value());
  return 0;
}
