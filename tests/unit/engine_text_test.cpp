// Text output of the engine with the real Qwen3 tokenizer (third_party/qwen3-tokenizer) and the
// fake model: streamed text deltas concatenate to decode(tokens), and a stop string ends the sample
// with the text before it (the stop text itself is never emitted), across token boundaries.
#include <gtest/gtest.h>

#include "core/log.h"
#include "tokenizer/tokenizer.h"
#include "unit/engine_harness.h"
#include "unit/fake_model.h"

namespace syv::testing {
namespace {

std::unique_ptr<Tokenizer> load_tokenizer() {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/third_party/qwen3-tokenizer";
  auto tokenizer = Tokenizer::load(dir);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message() << " (run tools/setup/fetch-tokenizer.sh)";
  return tokenizer.ok() ? std::move(tokenizer.value()) : nullptr;
}

SampleOutput generate(Model& model, const Tokenizer& tokenizer, const Request& request) {
  set_log_level(LogLevel::WARN);
  EngineOptions o;
  o.page_size = 16;
  o.num_pages = 64;
  auto core = EngineCore::create(model, &tokenizer, o);
  EXPECT_TRUE(core.ok()) << core.message();
  Harness h(std::move(core).value());
  const uint64_t id = h.submit(request);
  h.run();
  h.expect_no_leaks();
  return h.output(id).samples.at(0);
}

TEST(EngineText, DeltasConcatenateToTheDecodedTokensAndStopStringsAreWithheld) {
  auto tokenizer = load_tokenizer();
  ASSERT_TRUE(tokenizer);
  FakeModel model(tokenizer->vocab_size());
  Request r;
  r.prompt_ids = tokenizer->encode("The quick brown fox jumps over the lazy dog.");
  r.params.temperature = 0.0f;
  r.params.max_tokens = 40;
  r.params.ignore_eos = true;
  const SampleOutput full = generate(model, *tokenizer, r);
  ASSERT_EQ(full.tokens.size(), 40u);
  EXPECT_EQ(full.text, tokenizer->decode(full.tokens, /*skip_special_tokens=*/true));
  ASSERT_GT(full.text.size(), 20u);

  int checked = 0;
  for (size_t start : {full.text.size() / 4, full.text.size() / 2, full.text.size() - 6}) {
    for (size_t len : {1, 3, 6}) {
      const std::string stop = full.text.substr(start, len);
      const size_t first = full.text.find(stop);
      Request s = r;
      s.params.stop = {"never-appears-xyz", stop};
      const SampleOutput got = generate(model, *tokenizer, s);
      EXPECT_EQ(got.finish_reason, "stop") << "stop \"" << stop << "\"";
      EXPECT_EQ(got.text, full.text.substr(0, first)) << "stop \"" << stop << "\"";
      ASSERT_LE(got.tokens.size(), full.tokens.size());
      EXPECT_TRUE(std::equal(got.tokens.begin(), got.tokens.end(), full.tokens.begin()));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 9);

  // A stop string that never matches: everything held back is released at the end.
  Request s = r;
  s.params.stop = {full.text.substr(0, 5) + "\x01"};
  const SampleOutput got = generate(model, *tokenizer, s);
  EXPECT_EQ(got.finish_reason, "length");
  EXPECT_EQ(got.text, full.text);
}

}  // namespace
}  // namespace syv::testing
