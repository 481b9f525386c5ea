// Errors as values at boundaries (parsers, request validation, file loading).
// A Status is either ok or carries a message a person can act on: the file, the field,
// expected vs found. Result<T> holds a value or a non-ok Status.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace syv {

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with context, e.g. the file name: "config.json: " + message.
  Status with_context(const std::string& context) const {
    return ok() ? *this : Error(context + ": " + message_);
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: must be an error

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }

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
