// Internal invariants: SYV_CHECK(cond) << "context"; aborts with file, line and the message.
// Use for programmer errors only; bad input from outside returns a Status instead.
#pragma once

#include <sstream>
#include <string>

namespace syv::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `cond ? (void)0 : Voidify() & CheckFailure(...) << x` type-check.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace syv::detail

#define SYV_CHECK(cond) \
  (cond) ? (void)0      \
         : ::syv::detail::Voidify() & ::syv::detail::CheckFailure(__FILE__, __LINE__, #cond)
#define SYV_CHECK_EQ(a, b) SYV_CHECK((a) == (b)) << (a) << " vs " << (b) << " "
#define SYV_CHECK_LT(a, b) SYV_CHECK((a) < (b)) << (a) << " vs " << (b) << " "
#define SYV_CHECK_LE(a, b) SYV_CHECK((a) <= (b)) << (a) << " vs " << (b) << " "
#define SYV_CHECK_GE(a, b) SYV_CHECK((a) >= (b)) << (a) << " vs " << (b) << " "
#define SYV_FATAL() ::syv::detail::CheckFailure(__FILE__, __LINE__, "fatal")
