#include "cli/serve_facts.h"

#include "backend/backend.h"
#include "cli/build_info.h"
#include "core/check.h"
#include "engine/engine.h"

namespace syv::cli {

server::DeploymentFacts serve_deployment_facts(Backend& backend, const Engine& engine,
                                               const std::string& kv_sized_by,
                                               std::optional<server::MemoryPlanFacts> memory_plan) {
  server::DeploymentFacts f;
  const BuildInfo& build = build_info();
  f.version = build.version;
  f.git_commit = build.git_commit;
  f.build_type = build.build_type;
  f.compiler = build.compiler;
  f.cuda = build.cuda;
  const DeviceFacts device = backend.device_facts();
  f.backend = device.backend;
  f.device_index = device.index;
  f.device_name = device.name;
  f.device_memory_bytes = device.memory_bytes;
  const EngineOptions& o = engine.options();
  const CacheSpec& spec = engine.cache_spec();
  SYV_CHECK(o.num_pages > 0) << "serve_deployment_facts: the engine is not started";
  f.kv_pool_pages = o.num_pages;
  f.kv_page_size = o.page_size;
  f.kv_bytes_per_token = spec.kv_bytes_per_token;
  f.kv_dtype = spec.kv_layers.empty() ? "none" : std::string(dtype_name(spec.kv_layers[0].dtype));
  f.kv_sized_by = kv_sized_by;
  f.max_model_len = o.max_model_len;
  f.max_num_seqs = o.max_num_seqs;
  f.max_num_batched_tokens = o.max_num_batched_tokens;
  f.memory_plan = std::move(memory_plan);
  return f;
}

}  // namespace syv::cli
