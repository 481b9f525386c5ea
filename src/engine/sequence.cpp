#include "engine/sequence.h"

namespace syv {

const char* to_string(SequenceState state) {
  switch (state) {
    case SequenceState::kWaiting:
      return "waiting";
    case SequenceState::kLoading:
      return "loading";
    case SequenceState::kPrefilling:
      return "prefilling";
    case SequenceState::kDecoding:
      return "decoding";
    case SequenceState::kFinished:
      return "finished";
    case SequenceState::kAborted:
      return "aborted";
  }
  return "?";
}

Sequence::Sequence(uint64_t id, const std::vector<int32_t>& prompt, const SamplingParams* params,
                   int32_t sample_index, RequestGroup* group, Sequence* parent)
    : tokens(prompt),
      id_(id),
      params_(params),
      sample_index_(sample_index),
      prompt_len_(static_cast<int32_t>(prompt.size())),
      group_(group),
      parent_(parent) {}

}  // namespace syv
