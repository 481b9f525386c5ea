#include "io/json_describe.h"

#include <cstdint>
#include <sstream>

namespace syv {

std::string describe_json_value(const nlohmann::json& value, ShowJsonString show_string) {
  using json = nlohmann::json;
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
      return std::to_string(value.get<int64_t>());
    case json::value_t::number_unsigned:
      return std::to_string(value.get<uint64_t>());
    case json::value_t::number_float: {
      std::ostringstream os;
      os << value.get<double>();
      return os.str();
    }
    case json::value_t::string:
      return show_string(value.get_ref<const std::string&>());
    case json::value_t::array:
      return "an array of " + std::to_string(value.size());
    case json::value_t::object:
      return "an object";
    default:
      return "an invalid value";
  }
}

}  // namespace syv
