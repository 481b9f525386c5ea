#include "engine/device_sampling.h"

namespace syv {

SampleRow make_sample_row(const SamplingParams& p, SamplerState& state,
                          std::vector<SamplePenalty>& penalties) {
  SampleRow row;
  row.temperature = p.temperature;
  row.top_k = p.top_k;
  row.top_p = p.top_p;
  row.min_p = p.min_p;
  row.repetition_penalty = p.repetition_penalty;
  row.presence_penalty = p.presence_penalty;
  row.frequency_penalty = p.frequency_penalty;
  row.penalty_begin = static_cast<int32_t>(penalties.size());
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (repetition) {
    for (const auto& [t, count] : state.prompt_counts) {
      auto it = state.output_counts.find(t);
      const int32_t out = it == state.output_counts.end() ? 0 : it->second;
      penalties.push_back({t, additive ? out : 0, 1});
    }
  }
  if (repetition || additive) {
    for (const auto& [t, count] : state.output_counts) {
      if (repetition && state.prompt_counts.count(t)) continue;  // already listed
      penalties.push_back({t, additive ? count : 0, repetition ? 1 : 0});
    }
  }
  row.penalty_end = static_cast<int32_t>(penalties.size());
  if (p.temperature != 0.0f) row.uniform = state.rng.uniform();
  return row;
}

}  // namespace syv
