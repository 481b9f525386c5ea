// Range checks that model validators (validate_qwen3_config, validate_hybrid_config) apply to a
// parsed ModelConfig; messages name the config.json field and the value found.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "io/model_config.h"

namespace syv {

// Ok when value > 0, else `config.json: field "<field>": expected a positive integer, found <v>`.
Status check_positive_field(int64_t value, const char* field);

// Ok when value % divisor == 0 (divisor must already be checked positive), else
// `config.json: <field> (<v>) must be a multiple of <divisor_field> (<d>)`.
Status check_multiple_of(int64_t value, const char* field, int64_t divisor,
                         const char* divisor_field);

// Full-attention head layout: num_attention_heads, num_key_value_heads and head_dim positive (in
// that order), and the query heads a multiple of the KV heads.
Status check_attention_heads(const ModelConfig& c);

}  // namespace syv
