// Text output of the engine with the real Qwen3 tokenizer (third_party/qwen3-tokenizer) and the
// fake model: streamed text deltas concatenate to decode(tokens), and a stop string ends the sample
// with the text before it (the stop text itself is never emitted), across token boundaries; with
// include_stop_str_in_output the stop string (or the stop token's text) ends the text; min_tokens
// masks stop tokens and defers stop strings; logit_bias reaches the sampler.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/log.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "unit/engine_harness.h"
#include "unit/fake_model.h"
#include "unit/qwen3_tokenizer.h"

namespace syv::testing {
namespace {

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
  auto tokenizer = load_qwen3_tokenizer();
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

// The greedy reference: 40 tokens, EOS ignored, and the text length after each token.
struct Reference {
  Request request;
  SampleOutput out;
  std::vector<size_t> text_len;  // [41]: text streamed after j tokens (incomplete UTF-8 held)
};
Reference reference(Model& model, const Tokenizer& tokenizer) {
  Reference ref;
  ref.request.prompt_ids = tokenizer.encode("The quick brown fox jumps over the lazy dog.");
  ref.request.params.temperature = 0.0f;
  ref.request.params.max_tokens = 40;
  ref.request.params.ignore_eos = true;
  ref.out = generate(model, tokenizer, ref.request);
  IncrementalDetokenizer detokenizer(tokenizer, /*skip_special_tokens=*/true);
  ref.text_len.push_back(0);
  for (int32_t t : ref.out.tokens)
    ref.text_len.push_back(ref.text_len.back() + detokenizer.push(t).size());
  return ref;
}

TEST(EngineText, IncludeStopStrInOutputKeepsTheMatchedStopString) {
  auto tokenizer = load_qwen3_tokenizer();
  ASSERT_TRUE(tokenizer);
  FakeModel model(tokenizer->vocab_size());
  const Reference ref = reference(model, *tokenizer);
  const std::string& full = ref.out.text;
  ASSERT_GT(full.size(), 20u);
  for (size_t start : {full.size() / 4, full.size() / 2, full.size() - 6}) {
    for (size_t len : {1, 3, 6}) {
      const std::string stop = full.substr(start, len);
      const size_t first = full.find(stop);
      Request s = ref.request;
      s.params.stop = {"never-appears-xyz", stop};
      s.params.include_stop_str_in_output = true;
      const SampleOutput got = generate(model, *tokenizer, s);
      EXPECT_EQ(got.finish_reason, "stop") << "stop \"" << stop << "\"";
      EXPECT_EQ(got.text, full.substr(0, first + len)) << "stop \"" << stop << "\"";
    }
  }
  // A stop token's text is emitted too (a plain token here, so it has text).
  Request s = ref.request;
  const int32_t stop_token = ref.out.tokens[10];
  const size_t at = static_cast<size_t>(
      std::find(ref.out.tokens.begin(), ref.out.tokens.end(), stop_token) - ref.out.tokens.begin());
  s.params.stop_token_ids = {stop_token};
  for (bool include : {false, true}) {
    s.params.include_stop_str_in_output = include;
    const SampleOutput got = generate(model, *tokenizer, s);
    EXPECT_EQ(got.finish_reason, "stop");
    ASSERT_EQ(got.tokens.size(), at + 1);
    const std::vector<int32_t> shown(got.tokens.begin(), got.tokens.end() - (include ? 0 : 1));
    EXPECT_EQ(got.text, tokenizer->decode(shown, true)) << include;
    EXPECT_NE(tokenizer->decode({stop_token}, true), "") << "the test needs a stop token with text";
  }
}

TEST(EngineText, MinTokensDefersStopStringsThatCompleteInTheFirstTokens) {
  auto tokenizer = load_qwen3_tokenizer();
  ASSERT_TRUE(tokenizer);
  FakeModel model(tokenizer->vocab_size());
  const Reference ref = reference(model, *tokenizer);
  const std::string& full = ref.out.text;
  int checked = 0;
  for (int32_t k : {3, 10, 20}) {
    const size_t armed = ref.text_len[static_cast<size_t>(k)];  // text of the first k tokens
    ASSERT_GE(armed, 2u);
    // Ends inside the first k tokens; straddles the boundary; begins after it.
    for (const std::string& stop : {full.substr(armed - 1, 1), full.substr(armed - 1, 2),
                                    full.substr(armed - 2, 2), full.substr(armed, 2)}) {
      if (stop.empty()) continue;
      // The first occurrence whose last character comes after the first k tokens' text.
      size_t match = full.find(stop, armed >= stop.size() ? armed - stop.size() + 1 : 0);
      Request s = ref.request;
      s.params.stop = {stop};
      s.params.min_tokens = k;
      const SampleOutput got = generate(model, *tokenizer, s);
      SCOPED_TRACE("min_tokens " + std::to_string(k) + ", stop \"" + stop + "\"");
      if (match == std::string::npos) {
        EXPECT_EQ(got.finish_reason, "length");
        EXPECT_EQ(got.text, full);
      } else {
        EXPECT_EQ(got.finish_reason, "stop");
        EXPECT_EQ(got.text, full.substr(0, match));
        size_t tokens = 0;
        while (ref.text_len[tokens] < match + stop.size()) ++tokens;
        EXPECT_EQ(got.tokens.size(), tokens);
        EXPECT_GT(static_cast<int32_t>(got.tokens.size()), k);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12);
}

TEST(EngineText, MinTokensMasksStopTokens) {
  auto tokenizer = load_qwen3_tokenizer();
  ASSERT_TRUE(tokenizer);
  FakeModel model(tokenizer->vocab_size());
  const Reference ref = reference(model, *tokenizer);
  const int32_t stop_token = ref.out.tokens[2];
  for (int32_t k : {1, 3, 8}) {
    Request s = ref.request;
    s.params.stop_token_ids = {stop_token};
    s.params.min_tokens = k;
    const SampleOutput got = generate(model, *tokenizer, s);
    SCOPED_TRACE("min_tokens " + std::to_string(k));
    // Greedy is unchanged until the masked token would have been chosen.
    const size_t first =
        static_cast<size_t>(std::find(ref.out.tokens.begin(), ref.out.tokens.end(), stop_token) -
                            ref.out.tokens.begin());
    ASSERT_GE(got.tokens.size(), std::min<size_t>(first, 40));
    for (size_t j = 0; j < got.tokens.size(); ++j) {
      if (static_cast<int32_t>(j) < k) {
        EXPECT_NE(got.tokens[j], stop_token) << "token " << j;
      }
      if (j < first) {
        EXPECT_EQ(got.tokens[j], ref.out.tokens[j]) << "token " << j;
      }
    }
    if (got.finish_reason == "stop") {
      EXPECT_EQ(got.tokens.back(), stop_token);
      EXPECT_GT(static_cast<int32_t>(got.tokens.size()), k);
    } else {
      EXPECT_EQ(got.finish_reason, "length");
      EXPECT_EQ(got.tokens.size(), 40u);
    }
    if (static_cast<int32_t>(first) < k) {
      EXPECT_NE(got.tokens, ref.out.tokens);
    }
  }
}

TEST(EngineText, LogitBiasSteersTheTokens) {
  auto tokenizer = load_qwen3_tokenizer();
  ASSERT_TRUE(tokenizer);
  FakeModel model(tokenizer->vocab_size());
  const Reference ref = reference(model, *tokenizer);
  Request s = ref.request;
  s.params.max_tokens = 6;
  const int32_t forced = tokenizer->encode("fox")[0];
  s.params.logit_bias = {{forced, 50.0f}, {ref.out.tokens[0], -100.0f}};
  const SampleOutput got = generate(model, *tokenizer, s);
  EXPECT_EQ(got.tokens, std::vector<int32_t>(6, forced));
  // Out of the vocabulary: refused by the engine's validation, naming the field.
  auto core = EngineCore::create(model, tokenizer.get(), EngineOptions{});
  ASSERT_TRUE(core.ok()) << core.message();
  s.params.logit_bias = {{static_cast<int32_t>(tokenizer->vocab_size()), 1.0f}};
  const Status st = (*core)->validate(s);
  EXPECT_NE(st.message().find("logit_bias"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace syv::testing
