// `syv bench host-tier`'s figure for the loading state (kv/inflight_loads.h): how fast other
// sequences decode while a host hit's copies run.
//
// On its own EngineCore (stepped here, one step at a time, so each step can be timed and the
// resend's state read between steps): a `prefix_len`-token prompt runs cold, fillers push it out of
// the device pool into the host tier, `decoders` short requests start decoding; after a warm-up,
// `kBeforeSteps` decode steps are timed, then the prompt is sent again and every step after which
// its sequence is still loading (admitted, its copies in flight, not scheduled) is timed too. The
// ratio is the mean step time before over the mean while loading (decode speed while loading
// relative to before; the target is >= 0.95). A step's time includes the engine's work
// after it (EngineCore::between_steps: the host tier's pinning and write-ahead), as in the
// server's loop. Steps that wrote back an eviction are counted
// apart: the step waits for its write-back (on the write-back stream, no longer behind the load in
// flight: kv/host_tier.h "Copies"; before, such a step waited for the whole load).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "model/model.h"

namespace syv::cli {

// Where one step's wall time went: EngineCore::step() (of it, the engine's own schedule, forward
// and output phases: EngineStats) and between_steps() after it (the host tier's pinning and
// write-ahead).
struct LoadingStepParts {
  double schedule_s = 0, forward_s = 0, output_s = 0;  // EngineStats' phases of the step
  double step_s = 0;                                   // step() in all
  double between_s = 0;                                // the events drained, between_steps()
};

struct LoadingDecode {
  int32_t decoders = 0;
  int32_t before_steps = 0;
  double before_step_s = 0;               // mean wall time of a decode step of the decoders alone
  int32_t loading_steps = 0;              // steps after which the resend was still loading
  int32_t loading_steps_with_stores = 0;  // of those, steps that wrote an eviction back
  double loading_step_s = 0;  // mean wall time of the loading steps (admission step included)
  double loading_step_s_no_stores = 0;  // of the loading steps that wrote nothing back (0: none)
  // The admission step (the first loading step): its time and the pages and checkpoints its own
  // evictions wrote back (the step waits for them: the pages it hands out are reused).
  double admission_step_s = 0;
  uint64_t admission_stores = 0;
  uint64_t host_hit_tokens = 0;  // the resend's tokens that came from the host tier
  // Pieces of host tier memory pinned over the whole run and the engine thread's time pinning.
  uint64_t pieces_pinned = 0;
  double pin_s = 0;
  // Every loading step's wall time, in order, and whether it wrote an eviction back (the JSON's
  // per-step lists: where a low ratio comes from).
  std::vector<double> loading_step_times_s;
  std::vector<bool> loading_step_stored;
  std::vector<uint64_t> loading_step_written_ahead;  // pages the write-ahead copied after it
  // Evictions in it (and the write-ahead after it) that followed a write-ahead batch in flight.
  std::vector<uint64_t> loading_step_ahead_waits;
  std::vector<uint64_t> loading_step_pieces;  // host tier pieces pinned after it
  std::vector<LoadingStepParts> loading_step_parts;
  std::vector<double> before_step_times_s;  // the steps before the resend, likewise
  std::vector<uint64_t> before_step_pieces;
  std::vector<LoadingStepParts> before_step_parts;
  double ratio() const { return loading_step_s > 0 ? before_step_s / loading_step_s : 0; }
  double ratio_no_stores() const {
    return loading_step_s_no_stores > 0 ? before_step_s / loading_step_s_no_stores : 0;
  }
};

// `options` as resolved for the engine (a host tier, num_pages); `decoders` >= 1.
Result<LoadingDecode> measure_loading_decode(Model& model, const EngineOptions& options,
                                             int32_t prefix_len, int32_t decoders, uint64_t seed);

}  // namespace syv::cli
