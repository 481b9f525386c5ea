#include "server/api_error.h"

namespace syv::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json err = {{"message", message}, {"type", type}};
  err["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  err["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", err}};
}

ApiError ApiError::from_status(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return not_found(status.message());
    case StatusCode::kUnavailable:
      return ApiError{503, status.message(), "server_error", "", "engine_unavailable"};
    case StatusCode::kInternal:
      return server_error(status.message());
    case StatusCode::kOk:  // not an error: a caller bug, answered as one
      return server_error("internal error: an ok status reported as an error");
    case StatusCode::kInvalidArgument:
      break;
  }
  return ApiError{400, status.message(), "invalid_request_error", "", ""};
}

std::string ApiError::body() const {
  return dump_json(to_json());
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace syv::server
