#include "engine/request.h"

#include <sstream>

namespace syv {
namespace {

template <typename T>
Status out_of_range(const char* field, const char* expected, T value) {
  std::ostringstream out;
  out << "sampling parameter " << field << ": expected " << expected << ", found " << value;
  return Status::Error(out.str());
}

}  // namespace

Status SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || temperature > 100.0f)
    return out_of_range("temperature", "0..100", temperature);
  if (top_k < -1) return out_of_range("top_k", "-1, 0 (off) or >= 1", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return out_of_range("top_p", "(0, 1]", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return out_of_range("min_p", "[0, 1]", min_p);
  if (!(repetition_penalty > 0.0f) || repetition_penalty > 100.0f)
    return out_of_range("repetition_penalty", "(0, 100]", repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return out_of_range("presence_penalty", "[-2, 2]", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return out_of_range("frequency_penalty", "[-2, 2]", frequency_penalty);
  if (prompt_logprobs < -1 || prompt_logprobs > 20)
    return out_of_range("prompt_logprobs", "-1 (off) or 0..20", prompt_logprobs);
  if (max_tokens < 0) return out_of_range("max_tokens", ">= 0", max_tokens);
  if (top_logprobs < 0 || top_logprobs > 20)
    return out_of_range("top_logprobs", "0..20", top_logprobs);
  if (n < 1 || n > 64) return out_of_range("n", "1..64", n);
  for (const std::string& s : stop)
    if (s.empty())
      return Status::Error("sampling parameter stop: expected non-empty strings, found \"\"");
  for (int32_t id : stop_token_ids)
    if (id < 0) return out_of_range("stop_token_ids", "ids >= 0", id);
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return out_of_range("logit_bias", "token ids >= 0", id);
    if (!(bias >= -100.0f && bias <= 100.0f))
      return out_of_range("logit_bias", "biases in [-100, 100]", bias);
  }
  if (min_tokens < 0 || min_tokens > max_tokens)
    return out_of_range("min_tokens", "0..max_tokens", min_tokens);
  return Status::Ok();
}

}  // namespace syv
