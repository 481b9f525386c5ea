// libFuzzer target: parse_model_config on arbitrary text. A config that parses must be
// self-consistent (one layer type per layer, positive sizes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto c = syv::parse_model_config(text, "fuzz/config.json");
  if (!c.ok()) return 0;
  if (static_cast<int64_t>(c->layer_types.size()) != c->num_hidden_layers) std::abort();
  if (c->hidden_size <= 0 || c->num_attention_heads <= 0 || c->num_key_value_heads <= 0 ||
      c->head_dim <= 0 || c->vocab_size <= 0) {
    std::abort();
  }
  if (c->num_attention_heads % c->num_key_value_heads != 0) std::abort();
  if (c->rotary_dim() <= 0 || c->rotary_dim() > c->head_dim) std::abort();
  return 0;
}
