// An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}} with its HTTP status.
// Every 4xx/5xx body the server writes is one of these, so clients (the official `openai`
// packages included) surface the message and the parameter at fault.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "core/status.h"

namespace syv::server {

struct ApiError {
  int status = 400;                            // HTTP status
  std::string message;                         // what a person can act on: field, expected, found
  std::string type = "invalid_request_error";  // OpenAI's error type
  std::string param;                           // the request field at fault; "" -> null
  std::string code;                            // machine-readable code; "" -> null

  nlohmann::json to_json() const;
  std::string body() const;

  static ApiError bad_param(std::string param, std::string message) {
    return ApiError{400, std::move(message), "invalid_request_error", std::move(param),
                    "invalid_value"};
  }
  static ApiError unsupported(std::string param, std::string message) {
    return ApiError{400, std::move(message), "invalid_request_error", std::move(param),
                    "unsupported_parameter"};
  }
  static ApiError unauthorized(std::string message) {
    return ApiError{401, std::move(message), "invalid_request_error", "", "invalid_api_key"};
  }
  static ApiError not_found(std::string message, std::string code = "not_found") {
    return ApiError{404, std::move(message), "invalid_request_error", "", std::move(code)};
  }
  static ApiError server_error(std::string message) {
    return ApiError{500, std::move(message), "server_error", "", "internal_error"};
  }
  // A non-ok Status from below the server (the engine's submit()), by its code:
  // kInvalidArgument -> 400 (no param: the message names the field), kNotFound -> 404,
  // kUnavailable -> 503 "engine_unavailable" (the engine stopped or is stopping), kInternal -> 500.
  static ApiError from_status(const Status& status);
};

// Serializes compactly; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& j);
std::string dump_json(const nlohmann::ordered_json& j);

// Returns the error of an std::optional<ApiError> expression, when it holds one.
#define SYV_API_RETURN_IF(expr)                   \
  do {                                            \
    if (auto syv_err_ = (expr)) return *syv_err_; \
  } while (0)

// Either a value or an ApiError (request validation results).
template <typename T>
class ApiResult {
 public:
  ApiResult(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  ApiResult(ApiError error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  bool ok() const { return value_.has_value(); }
  const ApiError& error() const { return error_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  ApiError error_;
};

}  // namespace syv::server
