// Unicode normalizers of tokenizer.json ("normalizer": NFC, NFD, NFKC, NFKD, or a Sequence of
// them) through utf8proc. Other normalizer types are refused at load with their name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace syv {

class Normalizer {
 public:
  enum class Form { kNFC, kNFD, kNFKC, kNFKD };

  // `spec` is the "normalizer" value of tokenizer.json (null means none).
  static Result<Normalizer> from_json(const nlohmann::json& spec);

  bool empty() const { return forms_.empty(); }
  // Normalizes valid UTF-8 text. Text that is already normal is returned unchanged without
  // calling utf8proc when a byte scan proves it (ASCII; for NFC, nothing at or above U+0300).
  std::string normalize(std::string_view text) const;

 private:
  std::vector<Form> forms_;  // applied in order
};

}  // namespace syv
