// Status codes: Error() keeps meaning "invalid argument", each constructor sets its code, context
// keeps the code, and Result<T> reports its status's code (kOk when it holds a value).
#include "core/status.h"

#include <gtest/gtest.h>

namespace syv {
namespace {

TEST(Status, OkHasNoCodeAndNoMessage) {
  Status st = Status::Ok();
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOk);
  EXPECT_EQ(st.message(), "");
}

TEST(Status, EachConstructorSetsItsCode) {
  EXPECT_EQ(Status::Error("x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Status::NotFound("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::Unavailable("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(Status::Internal("x").code(), StatusCode::kInternal);
  for (Status st : {Status::Error("a"), Status::NotFound("b"), Status::Unavailable("c"),
                    Status::Internal("d")}) {
    EXPECT_FALSE(st.ok()) << status_code_name(st.code());
  }
  EXPECT_STREQ(status_code_name(StatusCode::kUnavailable), "unavailable");
}

TEST(Status, ContextPrefixesTheMessageAndKeepsTheCode) {
  Status st = Status::Unavailable("stopped").with_context("engine");
  EXPECT_EQ(st.message(), "engine: stopped");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Status::Ok().with_context("engine").ok());
}

Result<int> half(int x) {
  if (x % 2) return Status::Error("half: " + std::to_string(x) + " is odd");
  if (x < 0) return Status::Internal("half: negative");
  return x / 2;
}

Status quarter(int x, int& out) {
  SYV_ASSIGN_OR_RETURN(int h, half(x));
  SYV_ASSIGN_OR_RETURN(out, half(h));
  return Status::Ok();
}

TEST(Status, ResultCarriesTheCodeThroughTheMacros) {
  EXPECT_EQ(half(4).code(), StatusCode::kOk);
  EXPECT_EQ(half(3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(half(-4).code(), StatusCode::kInternal);
  int out = 0;
  EXPECT_TRUE(quarter(8, out).ok());
  EXPECT_EQ(out, 2);
  Status st = quarter(-8, out);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(quarter(6, out).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syv
