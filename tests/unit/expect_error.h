// EXPECT_ERROR_HAS(result, "part", ...): `result` (a Status or Result<T>) is an error whose message
// contains every part; on failure it prints the message and the part it lacks.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#define EXPECT_ERROR_HAS(result, ...)                                     \
  do {                                                                    \
    auto&& r_ = (result);                                                 \
    ASSERT_FALSE(r_.ok()) << "expected an error";                         \
    for (const std::string& s_ : std::vector<std::string>{__VA_ARGS__}) { \
      EXPECT_NE(r_.message().find(s_), std::string::npos)                 \
          << "message: " << r_.message() << "\n   lacks: " << s_;         \
    }                                                                     \
  } while (0)
