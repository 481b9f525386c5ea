#include "server/auth.h"

#include <cctype>
#include <cstdio>
#include <fstream>

namespace syv::server {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Compare over the longer length so that the time does not depend on where they differ.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

Status ApiKeys::add(std::string_view key) {
  if (key.empty()) return Status::Error("API key: empty key");
  for (char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return Status::Error("API key " + mask_key(key) +
                           ": contains whitespace or a control character");
    }
  }
  keys_.emplace_back(key);
  return Status::Ok();
}

Status ApiKeys::add_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(path + ": cannot open the API key file");
  std::string line;
  int line_no = 0;
  size_t added = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    Status st = add(key);
    if (!st.ok()) return st.with_context(path + " line " + std::to_string(line_no));
    ++added;
  }
  if (added == 0) return Status::Error(path + ": holds no API key (one key a line expected)");
  return Status::Ok();
}

int ApiKeys::find(std::string_view presented) const {
  if (presented.empty()) return -1;
  int found = -1;
  for (size_t i = 0; i < keys_.size(); ++i) {
    // No early exit: every key is compared.
    const int mask = -static_cast<int>(constant_time_equal(keys_[i], presented));
    found = (mask & static_cast<int>(i)) | (~mask & found);
  }
  return found;
}

bool ApiKeys::matches(std::string_view presented) const {
  return find(presented) >= 0;
}

Status ApiKeys::add_public_route(std::string_view route) {
  route = trim(route);
  if (route.empty()) return Status::Error("--public-routes: empty route in the list");
  if (route.front() != '/') {
    return Status::Error("--public-routes: route \"" + std::string(route) +
                         "\" must start with '/'");
  }
  public_routes_.emplace(route);
  return Status::Ok();
}

Status ApiKeys::add_public_routes(std::string_view list) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    SYV_RETURN_IF_ERROR(add_public_route(list.substr(start, comma - start)));
    start = comma + 1;
  }
  return Status::Ok();
}

bool ApiKeys::is_public(std::string_view path) const {
  return public_routes_.find(path) != public_routes_.end();
}

std::string extract_api_key(std::string_view authorization, std::string_view x_api_key) {
  std::string_view auth = trim(authorization);
  if (auth.size() > 7) {
    std::string scheme(auth.substr(0, 7));
    for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == "bearer ") return std::string(trim(auth.substr(7)));
  }
  return std::string(trim(x_api_key));
}

std::string mask_key(std::string_view key) {
  if (key.size() <= 12) return "****";
  return std::string(key.substr(0, 4)) + "..." + std::string(key.substr(key.size() - 4));
}

Result<std::string> generate_api_key() {
  std::FILE* f = std::fopen("/dev/urandom", "rb");
  if (f == nullptr) return Status::Error("/dev/urandom: cannot open to generate an API key");
  unsigned char bytes[20];
  const size_t got = std::fread(bytes, 1, sizeof(bytes), f);
  std::fclose(f);
  if (got != sizeof(bytes)) return Status::Error("/dev/urandom: short read");
  static const char* hex = "0123456789abcdef";
  std::string key = "sk-syv-";
  for (unsigned char b : bytes) {
    key.push_back(hex[b >> 4]);
    key.push_back(hex[b & 15]);
  }
  return key;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  // 127.0.0.0/8: four dotted decimal parts, the first 127.
  if (host.substr(0, 4) != "127.") return false;
  int parts = 2;  // "127" and the part after the first dot
  for (char c : host.substr(4)) {
    if (c == '.') {
      ++parts;
    } else if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return parts == 4;
}

}  // namespace syv::server
