// Errors as values at boundaries (parsers, request validation, file loading).
// A Status is either ok or carries a message a person can act on: the file, the field,
// expected vs found, and a code that says what kind of failure it is (a caller that maps errors,
// e.g. the server to HTTP statuses, switches on the code, never on the message).
// Result<T> holds a value or a non-ok Status.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace syv {

// What kind of failure a Status is. Error() means kInvalidArgument: the input (a file, a flag, a
// request field) is wrong and retrying it unchanged fails again.
enum class StatusCode : uint8_t {
  kOk,
  kInvalidArgument,  // bad input: a file, a flag, a request field (HTTP 400)
  kNotFound,         // a named thing (file, model, route) does not exist (HTTP 404)
  kUnavailable,      // the service cannot take it now (stopped, stopping); retry later (HTTP 503)
  kInternal,         // a bug or a failure below us (device, allocation) (HTTP 500)
};

// "invalid argument", "not found", ... for messages and tests.
constexpr const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kInternal:
      return "internal";
  }
  return "?";
}

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  // Invalid argument (the common case: every parser and validator).
  static Status Error(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status NotFound(std::string message) {
    return Status(StatusCode::kNotFound, std::move(message));
  }
  static Status Unavailable(std::string message) {
    return Status(StatusCode::kUnavailable, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(StatusCode::kInternal, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with context, e.g. the file name: "config.json: " + message. Keeps
  // the code.
  Status with_context(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + message_);
  }

 private:
  // `code` must not be kOk (an ok Status carries no message).
  Status(StatusCode code, std::string message) : message_(std::move(message)), code_(code) {}
  std::string message_;
  StatusCode code_ = StatusCode::kOk;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: must be an error

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }
  StatusCode code() const { return ok() ? StatusCode::kOk : status_.code(); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_ = Status::Error("empty result");
};

}  // namespace syv

// Returns early from a function returning Status or Result<T> when `expr` fails.
#define SYV_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::syv::Status syv_status_ = (expr);        \
    if (!syv_status_.ok()) return syv_status_; \
  } while (0)

#define SYV_CONCAT_INNER(a, b) a##b
#define SYV_CONCAT(a, b) SYV_CONCAT_INNER(a, b)
// `SYV_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define SYV_ASSIGN_OR_RETURN(lhs, expr)                                                           \
  auto SYV_CONCAT(syv_result_, __LINE__) = (expr);                                                \
  if (!SYV_CONCAT(syv_result_, __LINE__).ok()) return SYV_CONCAT(syv_result_, __LINE__).status(); \
  lhs = std::move(SYV_CONCAT(syv_result_, __LINE__)).value()
