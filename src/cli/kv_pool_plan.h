// The KV pool's bytes on a GPU, as vLLM sizes its pool: device total x utilization - weights (what
// the backend holds after loading) - one step's activations (estimated for the step budget) - the
// runtime reserve (backend/memory_plan.h, the plan `syv inspect` prints). Used by the commands that
// run the engine on a GPU without --kv-cache-mb / --num-pages (`syv serve`, `syv bench offline`).
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/deployment_facts.h"

namespace syv {
class CudaBackend;
}

namespace syv::cli {

// The pool's bytes (the target's share when `e.draft_model` is set: both pools get as many pages),
// and the plan's figures for /metrics (server/deployment_facts.h).
struct PlannedPool {
  int64_t kv_bytes = 0;
  server::MemoryPlanFacts facts;
};

// Logs the plan ("memory plan: ..."). Fails with the plan's message when the weights, activations
// and reserve leave no room for one sequence at `utilization` (0.05..1).
Result<PlannedPool> plan_kv_pool_bytes(CudaBackend& gpu, Model& model, const EngineOptions& e,
                                       double utilization);

// The pool of an engine about to run on `backend`: sized by the plan (utilization) on a CUDA
// backend when neither --kv-cache-mb nor --num-pages was given (`pool_flag_given`), else left as
// `options` has it. Sets options->kv_cache_bytes; returns the plan's facts when the plan sized it.
Result<std::optional<server::MemoryPlanFacts>> size_kv_pool(Backend& backend, Model& model,
                                                            EngineOptions* options,
                                                            bool pool_flag_given,
                                                            double utilization);

}  // namespace syv::cli
