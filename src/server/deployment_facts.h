// What a deployment is, fixed at start-up: the build, the device and how the KV pool was sized.
// `syv serve` fills it from the objects it runs with (cli/serve.cpp) and GET /metrics exports it
// (Metrics::set_deployment), so a client that cannot read the start-up log (`syv verify --url`,
// an operator's dashboard) sees the same facts. Series (docs/server.md "Metrics"):
//   syv_build_info{version, git_commit, build_type, compiler, cuda} 1
//   syv_device_info{backend, index, name} 1, syv_device_memory_bytes (when known)
//   syv_kv_cache_info{dtype, sized_by} 1
//   syv_kv_pool_pages, syv_kv_page_size_tokens, syv_kv_pool_tokens, syv_kv_bytes_per_token,
//   syv_max_model_len, syv_max_num_seqs, syv_max_num_batched_tokens        gauges
//   syv_memory_plan_{utilization, budget_bytes, weight_bytes, activation_bytes,
//   runtime_reserve_bytes, state_bytes}      gauges, only when the GPU memory plan sized the pool
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace syv::server {

// backend/memory_plan.h's inputs and result as `syv serve` used them on a GPU.
struct MemoryPlanFacts {
  double utilization = 0;             // --gpu-memory-utilization
  int64_t budget_bytes = 0;           // device total x utilization
  int64_t weight_bytes = 0;           // weights as the backend holds them
  int64_t activation_bytes = 0;       // one step's activations, estimated
  int64_t runtime_reserve_bytes = 0;  // CUDA context, libraries, the backend's scratch
  int64_t state_bytes = 0;            // hybrids: recurrent-state slots reserved before the pool
};

struct DeploymentFacts {
  // The build (cli/build_info.h).
  std::string version, git_commit, build_type, compiler, cuda;
  // The device (Backend::device_facts()).
  std::string backend;               // "cpu", "cuda"
  int32_t device_index = -1;         // -1: the backend has no device index
  std::string device_name;           // "" = unknown
  int64_t device_memory_bytes = -1;  // total; -1 = unknown (the series is then left out)
  // The KV pool as the engine built it (Engine::options() after start(), Engine::cache_spec()).
  int64_t kv_pool_pages = 0;       // usable pages (a graph padding page, if any, not counted)
  int64_t kv_page_size = 0;        // tokens per page
  int64_t kv_bytes_per_token = 0;  // K and V of every attention layer, scales included
  std::string kv_dtype;            // "f32", "bf16", "f8e4m3", "u4x2"
  // What set the pool's size: "gpu-memory-utilization" (the memory plan), "kv-cache-mb",
  // "num-pages".
  std::string kv_sized_by;
  int64_t max_model_len = 0;
  int64_t max_num_seqs = 0;
  int64_t max_num_batched_tokens = 0;
  std::optional<MemoryPlanFacts> memory_plan;  // when the GPU memory plan sized the pool
};

// Appends the series above in the Prometheus text format (label values escaped).
void render_deployment_facts(const DeploymentFacts& facts, std::string& out);

}  // namespace syv::server
