#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace syv {
namespace {

Status parse_into(const nlohmann::json& spec, std::vector<Normalizer::Form>& forms) {
  if (spec.is_null()) return Status::Ok();
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    return Status::Error("normalizer: expected an object with a string \"type\", found " +
                         spec.dump().substr(0, 80));
  }
  const std::string type = spec["type"].get<std::string>();
  if (type == "NFC") {
    forms.push_back(Normalizer::Form::kNFC);
  } else if (type == "NFD") {
    forms.push_back(Normalizer::Form::kNFD);
  } else if (type == "NFKC") {
    forms.push_back(Normalizer::Form::kNFKC);
  } else if (type == "NFKD") {
    forms.push_back(Normalizer::Form::kNFKD);
  } else if (type == "Sequence") {
    if (!spec.contains("normalizers") || !spec["normalizers"].is_array()) {
      return Status::Error("normalizer Sequence: expected an array \"normalizers\"");
    }
    for (const auto& n : spec["normalizers"]) SYV_RETURN_IF_ERROR(parse_into(n, forms));
  } else {
    return Status::Error("normalizer type \"" + type +
                         "\" is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)");
  }
  return Status::Ok();
}

bool all_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// True when s has no code point >= U+0300 (no lead byte >= 0xCC). Such text is in NFC: every
// character below U+0300 is NFC_Quick_Check=Yes and none of them combines with a previous one.
bool below_u0300(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0xCC) return false;
  }
  return true;
}

}  // namespace

Result<Normalizer> Normalizer::from_json(const nlohmann::json& spec) {
  Normalizer n;
  SYV_RETURN_IF_ERROR(parse_into(spec, n.forms_));
  return n;
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string current(text);
  for (Form form : forms_) {
    if (all_ascii(current)) return current;
    if (form == Form::kNFC && below_u0300(current)) continue;
    int options = UTF8PROC_STABLE;
    switch (form) {
      case Form::kNFC:
        options |= UTF8PROC_COMPOSE;
        break;
      case Form::kNFD:
        options |= UTF8PROC_DECOMPOSE;
        break;
      case Form::kNFKC:
        options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        break;
      case Form::kNFKD:
        options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        break;
    }
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                     static_cast<utf8proc_ssize_t>(current.size()), &out,
                     static_cast<utf8proc_option_t>(options));
    // The input is valid UTF-8 (the tokenizer makes it so), so utf8proc cannot fail but for
    // memory exhaustion.
    SYV_CHECK(n >= 0) << "utf8proc_map: " << utf8proc_errmsg(n);
    current.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
  }
  return current;
}

}  // namespace syv
