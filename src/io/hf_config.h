// config.json (+ generation_config.json) -> ModelConfig, validated.
#pragma once

#include <string>

#include "core/status.h"
#include "io/model_config.h"

namespace syv {

// Parses the JSON text of a config.json. `source` names it in error messages.
// Unknown model_type -> an error listing the supported ones ("qwen3", "qwen3_5", "qwen3_5_text",
// "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next"). "qwen3_5"/"qwen3_5_moe" read the text model
// from "text_config". rope_scaling/rope_parameters other than "default" are refused.
// Missing/invalid fields -> "config.json: field \"hidden_size\": expected a positive integer, found
// ...".
Result<ModelConfig> parse_model_config(const std::string& json_text,
                                       const std::string& source = "config.json");

// Reads dir/config.json and, when present, dir/generation_config.json (eos_token_id may be an int
// or a list; it overrides config.json's). A `dir` that is a GGUF file, a Hugging Face cache root
// or not a folder is explained first (io/model_folder.h).
Result<ModelConfig> load_model_config(const std::string& dir);

}  // namespace syv
