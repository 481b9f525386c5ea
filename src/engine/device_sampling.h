// Sampling on the backend's device (Backend::sample(), backend.h): the engine's SamplingParams and
// SamplerState turned into the backend's flat row description. Only token ids cross to the host.
// The engine uses it when the backend supports_sampling() and no row of the step asks for
// logprobs, logit_bias, min_tokens or a grammar (those keep the host path: engine/sampler.h,
// which needs the whole row; the device kernels know neither a bias nor a mask).
#pragma once

#include <vector>

#include "backend/backend.h"
#include "engine/request.h"
#include "engine/sampler.h"

namespace syv {

// True when this request's rows must be sampled on the host: logprobs need the full row;
// logit_bias, the min_tokens mask and a grammar's token mask (structured output) are applied by
// the host Sampler only.
inline bool needs_host_sampling(const SamplingParams& p) {
  return p.logprobs || p.top_logprobs > 0 || !p.logit_bias.empty() || p.min_tokens > 0 ||
         p.grammar != nullptr || p.prompt_logprobs >= 0;
}

// The row for one sequence's next token: its parameters, its penalty entries (appended to
// `penalties`; one per distinct token, as apply_penalties() treats them) and, when temperature
// > 0, one uniform draw from state.rng (the draw the CPU sampler would make). The caller records
// the chosen token with state.add_output() afterwards.
SampleRow make_sample_row(const SamplingParams& p, SamplerState& state,
                          std::vector<SamplePenalty>& penalties);

}  // namespace syv
