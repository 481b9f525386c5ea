// The facts `syv serve` exports in /metrics (server/deployment_facts.h), read from the objects
// it serves with: the build (cli/build_info.h), the backend's device, the started engine's
// options and cache spec, and, when it sized the pool, the GPU memory plan.
#pragma once

#include <optional>
#include <string>

#include "server/deployment_facts.h"

namespace syv {
class Backend;
class Engine;
}  // namespace syv

namespace syv::cli {

// `engine` must be started. `kv_sized_by`: "gpu-memory-utilization" (then `memory_plan` is the
// plan's), "kv-cache-mb" or "num-pages".
server::DeploymentFacts serve_deployment_facts(Backend& backend, const Engine& engine,
                                               const std::string& kv_sized_by,
                                               std::optional<server::MemoryPlanFacts> memory_plan);

}  // namespace syv::cli
