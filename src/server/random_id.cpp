#include "server/random_id.h"

#include <random>

namespace syv::server {

std::string random_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id.push_back(hex[rng() & 15]);
  return id;
}

}  // namespace syv::server
