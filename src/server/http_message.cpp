#include "server/http_message.h"

#include <cctype>

namespace syv::server {

bool header_name_equals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

namespace {

const std::string* find_header(const HeaderFields& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (header_name_equals(key, name)) return &value;
  }
  return nullptr;
}

}  // namespace

bool HttpRequest::has_header(std::string_view name) const {
  return find_header(headers, name) != nullptr;
}

std::string HttpRequest::get_header_value(std::string_view name) const {
  const std::string* value = find_header(headers, name);
  return value != nullptr ? *value : std::string();
}

size_t HttpRequest::header_count(std::string_view name) const {
  size_t n = 0;
  for (const auto& header : headers) n += header_name_equals(header.first, name) ? 1 : 0;
  return n;
}

void HttpResponse::set_header(std::string name, std::string value) {
  for (auto& [key, existing] : headers) {
    if (header_name_equals(key, name)) {
      existing = std::move(value);
      return;
    }
  }
  headers.emplace_back(std::move(name), std::move(value));
}

bool HttpResponse::has_header(std::string_view name) const {
  return find_header(headers, name) != nullptr;
}

std::string HttpResponse::get_header_value(std::string_view name) const {
  const std::string* value = find_header(headers, name);
  return value != nullptr ? *value : std::string();
}

}  // namespace syv::server
