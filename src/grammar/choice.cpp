#include "grammar/choice.h"

#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace syv::grammar {

Result<std::string> choice_gbnf(const std::vector<std::string>& choices) {
  if (choices.empty()) return Status::Error("choice list: expected at least one string");
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string& c = choices[i];
    for (size_t pos = 0; pos < c.size();) {
      uint32_t cp = 0;
      if (!utf8_decode(c, pos, cp)) {
        return Status::Error("choice list: entry " + std::to_string(i) + " is not valid UTF-8");
      }
    }
    out += (i ? " | \"" : "\"") + gbnf_escape(c) + "\"";
  }
  return out + "\n";
}

}  // namespace syv::grammar
