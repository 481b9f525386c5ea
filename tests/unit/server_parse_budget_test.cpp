// The server-wide parse budget (server/parse_budget.h): what a hold takes and gives back, refusals
// that change nothing, a request larger than the whole budget, holds moved and destroyed on every
// path, many threads at once never past the capacity; and count_argument_values, the part of the
// estimate that tool-call arguments strings add.
#include "server/parse_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "server/openai_schema.h"

namespace syv::server {
namespace {

using Grow = ParseBudget::Hold::Grow;

TEST(ParseBudget, HoldsAndReleases) {
  ParseBudget budget(1000);
  {
    ParseBudget::Hold a = budget.hold();
    EXPECT_EQ(a.grow(600), Grow::kOk);
    EXPECT_EQ(budget.in_use(), 600u);
    ParseBudget::Hold b = budget.hold();
    EXPECT_EQ(b.grow(400), Grow::kOk);  // exactly full
    EXPECT_EQ(budget.in_use(), 1000u);
    // Full: a third request is busy, and a refusal changes nothing.
    ParseBudget::Hold c = budget.hold();
    EXPECT_EQ(c.grow(1), Grow::kBusy);
    EXPECT_EQ(c.bytes(), 0u);
    EXPECT_EQ(budget.in_use(), 1000u);
    // A hold grows in steps (the body, then its arguments strings) and keeps the sum.
    b.release();
    EXPECT_EQ(budget.in_use(), 600u);
    EXPECT_EQ(c.grow(100), Grow::kOk);
    EXPECT_EQ(c.grow(300), Grow::kOk);
    EXPECT_EQ(c.bytes(), 400u);
    EXPECT_EQ(c.grow(1), Grow::kBusy);
    EXPECT_EQ(c.bytes(), 400u);
  }
  EXPECT_EQ(budget.in_use(), 0u);  // every hold destroyed gave its bytes back
}

TEST(ParseBudget, LargerThanTheWholeBudgetIsTooLargeNotBusy) {
  ParseBudget budget(1000);
  ParseBudget::Hold a = budget.hold();
  EXPECT_EQ(a.grow(1001), Grow::kTooLarge);
  EXPECT_EQ(budget.in_use(), 0u);
  // Also when it is the sum of a hold's steps, and whatever else is held.
  EXPECT_EQ(a.grow(700), Grow::kOk);
  EXPECT_EQ(a.grow(301), Grow::kTooLarge);
  EXPECT_EQ(a.grow(SIZE_MAX), Grow::kTooLarge);  // no overflow
  EXPECT_EQ(budget.in_use(), 700u);
  ParseBudget::Hold b = budget.hold();
  EXPECT_EQ(b.grow(301), Grow::kBusy);  // would fit alone: retry later
  EXPECT_EQ(b.grow(300), Grow::kOk);
  // A hold without a budget holds nothing.
  ParseBudget::Hold none;
  EXPECT_EQ(none.grow(1), Grow::kTooLarge);
  EXPECT_EQ(none.bytes(), 0u);
}

TEST(ParseBudget, MovedHoldsReleaseOnceOnEveryPath) {
  ParseBudget budget(1000);
  ParseBudget::Hold outer = budget.hold();
  {
    ParseBudget::Hold a = budget.hold();
    ASSERT_EQ(a.grow(250), Grow::kOk);
    ParseBudget::Hold b(std::move(a));  // NOLINT: a is checked after the move on purpose
    EXPECT_EQ(a.bytes(), 0u);           // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(b.bytes(), 250u);
    EXPECT_EQ(budget.in_use(), 250u);
    ASSERT_EQ(outer.grow(100), Grow::kOk);
    outer = std::move(b);  // the 100 outer held go back; it now holds b's 250
    EXPECT_EQ(budget.in_use(), 250u);
    EXPECT_EQ(outer.bytes(), 250u);
  }
  EXPECT_EQ(budget.in_use(), 250u);
  outer.release();
  outer.release();  // twice: nothing more
  EXPECT_EQ(budget.in_use(), 0u);
  // An exception unwinding through a hold gives its bytes back.
  try {
    ParseBudget::Hold h = budget.hold();
    ASSERT_EQ(h.grow(999), Grow::kOk);
    throw std::runtime_error("a route threw");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(ParseBudget, ManyThreadsNeverPassTheCapacity) {
  constexpr size_t kCapacity = 10'000;
  ParseBudget budget(kCapacity);
  std::atomic<size_t> held{0};  // the sum of what the holds hold, checked against the capacity
  std::atomic<bool> over{false};
  std::atomic<int> granted{0}, busy{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20'000; ++i) {
        ParseBudget::Hold h = budget.hold();
        const size_t bytes = 500 + static_cast<size_t>((i * 7 + t * 13) % 3000);
        if (h.grow(bytes) == Grow::kOk) {
          granted.fetch_add(1);
          if (held.fetch_add(bytes) + bytes > kCapacity) over.store(true);
          held.fetch_sub(bytes);
        } else {
          busy.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(over.load());
  EXPECT_EQ(budget.in_use(), 0u);
  EXPECT_EQ(granted.load() + busy.load(), 8 * 20'000);
  EXPECT_GT(granted.load(), 0);
}

TEST(ParseBudget, CountsTheValuesOfArgumentsStrings) {
  using nlohmann::json;
  const json chat = json::parse(R"({"messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": [1, 2]}"}},
        {"id": "2", "type": "function", "function": {"name": "g", "arguments": "[0, 0, 0]"}}]}]})");
  EXPECT_EQ(count_argument_values(chat, 1000), 4u + 4u);  // {} [] 1 2, and [] 0 0 0
  EXPECT_EQ(count_argument_values(chat, 5), 5u);          // stops at the cap
  // A Responses function_call item; an "arguments" that is not a string is already in the
  // body's count; a string that is not JSON counts what the scan read before the error.
  const json responses = json::parse(R"({"input": [
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{\"x\": 1}"},
      {"type": "message", "role": "user", "content": "hi", "x": {"arguments": {"y": 2}}}]})");
  EXPECT_EQ(count_argument_values(responses, 1000), 2u);
  EXPECT_EQ(count_argument_values(json::parse(R"({"arguments": "not json"})"), 1000), 0u);
  EXPECT_EQ(count_argument_values(json::parse(R"({"messages": "hi"})"), 1000), 0u);
}

}  // namespace
}  // namespace syv::server
