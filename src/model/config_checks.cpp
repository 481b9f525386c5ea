#include "model/config_checks.h"

#include <string>

namespace syv {

Status check_positive_field(int64_t value, const char* field) {
  if (value > 0) return Status::Ok();
  return Status::Error(std::string("config.json: field \"") + field +
                       "\": expected a positive integer, found " + std::to_string(value));
}

Status check_multiple_of(int64_t value, const char* field, int64_t divisor,
                         const char* divisor_field) {
  if (value % divisor == 0) return Status::Ok();
  return Status::Error(std::string("config.json: ") + field + " (" + std::to_string(value) +
                       ") must be a multiple of " + divisor_field + " (" + std::to_string(divisor) +
                       ")");
}

Status check_attention_heads(const ModelConfig& c) {
  SYV_RETURN_IF_ERROR(check_positive_field(c.num_attention_heads, "num_attention_heads"));
  SYV_RETURN_IF_ERROR(check_positive_field(c.num_key_value_heads, "num_key_value_heads"));
  SYV_RETURN_IF_ERROR(check_positive_field(c.head_dim, "head_dim"));
  return check_multiple_of(c.num_attention_heads, "num_attention_heads", c.num_key_value_heads,
                           "num_key_value_heads");
}

}  // namespace syv
