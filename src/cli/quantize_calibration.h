// `syv quantize --calibration-file`: the inputs of every linear layer of a float model over a
// text, gathered on the CPU backend, as the GPTQ factor of each checkpoint tensor they multiply
// (model/gptq.h; quantize_folder() then quantizes those tensors by GPTQ's error feedback).
//
// The text is tokenized with the folder's tokenizer (no special tokens) and cut into windows of
// `context` tokens (at most `max_tokens` in all), each run from position 0 as a fresh sequence,
// as `syv eval-ppl` runs its windows. Every dense linear() the CPU backend computes reports its
// input x [T, K] and weight (CpuBackend::set_linear_observer); H = sum x x^T is kept per weight,
// and the loader's sources (LoadOptions::weight_sources) name the checkpoint tensors whose rows
// that weight holds: q_proj, k_proj and v_proj of one layer (one fused weight, one input) share
// one H. The inputs are the float model's own (GPTQ's reference runs its layers in order on the
// already quantized layers' outputs; this takes every layer's inputs from one float pass). A
// checkpoint's MTP head runs too, on each window's rows as the drafter feeds it (token p + 1 with
// the target's hidden state of p). MoE experts report the rows the router sends each of them
// (cpu::moe_experts), so every expert is calibrated on its own tokens; one the text routes no
// token to, and tensors no product reads (tied tables), get no factor (rounded to nearest).
//
// The Gram matrices take K^2 doubles per weight (an 8B model's: about 58 GB); when they exceed
// `memory_budget_bytes` together (by default half the host memory available) the weights are
// split into groups that fit, one pass over the text per group.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "model/gptq.h"

namespace syv::cli {

struct CalibrationOptions {
  std::string model_dir;
  std::string text_file;
  // Token ids to calibrate on instead of text_file's (then unread, and the folder needs no
  // tokenizer); cut to max_tokens like the text's.
  std::vector<int32_t> token_ids;
  int64_t context = 512;       // tokens per window (capped by max_position_embeddings)
  int64_t max_tokens = 32768;  // of the file, from its start
  double damp = 0.01;          // GPTQ's percdamp
  bool act_order = false;      // columns by decreasing diag(H), static groups (gptq_factor)
  // The Gram matrices' bytes per pass over the text; 0: half the host memory available once the
  // float model is loaded (at least 1 GiB).
  int64_t memory_budget_bytes = 0;
};

using GptqFactors = std::unordered_map<std::string, std::shared_ptr<const GptqFactor>>;

// Errors name the flag (--calibration-file, --calibration-tokens, --calibration-context) or the
// model folder, and what is wrong.
Result<GptqFactors> gather_gptq_factors(const CalibrationOptions& options);

}  // namespace syv::cli
