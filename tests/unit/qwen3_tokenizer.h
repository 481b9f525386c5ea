// The real Qwen3 tokenizer (third_party/qwen3-tokenizer, fetched by `make deps tokenizer`) for
// tests of text output: null, with the test failed, when it does not load.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace syv::testing {

inline std::unique_ptr<Tokenizer> load_qwen3_tokenizer() {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/third_party/qwen3-tokenizer";
  auto tokenizer = Tokenizer::load(dir);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message() << " (run tools/setup/fetch-tokenizer.sh)";
  return tokenizer.ok() ? std::move(tokenizer.value()) : nullptr;
}

}  // namespace syv::testing
