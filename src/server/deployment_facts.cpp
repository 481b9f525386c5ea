#include "server/deployment_facts.h"

#include <utility>
#include <vector>

#include "server/metrics.h"

namespace syv::server {
namespace {

// An info-style series: `name{label="value",...} 1`, the facts in its labels (Prometheus'
// convention for text that does not change while the process runs).
void append_info(std::string& out, const std::string& name, const std::string& help,
                 const std::vector<std::pair<std::string, std::string>>& labels) {
  out += "# HELP " + name + " " + help + "\n";
  out += "# TYPE " + name + " gauge\n";
  out += name + "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    out +=
        (i ? "," : "") + labels[i].first + "=\"" + prometheus_label_value(labels[i].second) + "\"";
  }
  out += "} 1\n";
}

}  // namespace

void render_deployment_facts(const DeploymentFacts& f, std::string& out) {
  append_info(out, "syv_build_info",
              "The syv build serving: version, git commit (-dirty: built with local edits), "
              "build type, compiler, CUDA toolkit and archs (none: a CPU-only build).",
              {{"version", f.version},
               {"git_commit", f.git_commit},
               {"build_type", f.build_type},
               {"compiler", f.compiler},
               {"cuda", f.cuda}});
  std::vector<std::pair<std::string, std::string>> device = {{"backend", f.backend}};
  if (f.device_index >= 0) device.emplace_back("index", std::to_string(f.device_index));
  device.emplace_back("name", f.device_name);
  append_info(out, "syv_device_info",
              "The device the model runs on: the backend (cpu, cuda), its index and its name.",
              device);
  if (f.device_memory_bytes >= 0) {
    append_metric(out, "syv_device_memory_bytes", "gauge",
                  "Total memory of the device (the host's MemTotal on the CPU backend).",
                  static_cast<double>(f.device_memory_bytes));
  }
  append_info(out, "syv_kv_cache_info",
              "The KV pool: the dtype of its K/V, and what sized it (gpu-memory-utilization: "
              "the memory plan; kv-cache-mb; num-pages).",
              {{"dtype", f.kv_dtype}, {"sized_by", f.kv_sized_by}});
  const std::pair<const char*, std::pair<const char*, int64_t>> pool[] = {
      {"syv_kv_pool_pages", {"KV pages in the pool (used + free).", f.kv_pool_pages}},
      {"syv_kv_page_size_tokens", {"Tokens per KV page.", f.kv_page_size}},
      {"syv_kv_pool_tokens",
       {"Tokens the KV pool holds (pages x page size).", f.kv_pool_pages * f.kv_page_size}},
      {"syv_kv_bytes_per_token",
       {"KV bytes of one token over every attention layer (K and V, scales included).",
        f.kv_bytes_per_token}},
      {"syv_max_model_len",
       {"Prompt + generated tokens of one sequence at most.", f.max_model_len}},
      {"syv_max_num_seqs", {"Sequences running at once at most.", f.max_num_seqs}},
      {"syv_max_num_batched_tokens",
       {"Tokens of one engine step at most (decode + prefill chunks).", f.max_num_batched_tokens}},
  };
  for (const auto& [name, what] : pool)
    append_metric(out, name, "gauge", what.first, static_cast<double>(what.second));
  if (!f.memory_plan) return;
  const MemoryPlanFacts& p = *f.memory_plan;
  append_metric(out, "syv_memory_plan_utilization", "gauge",
                "--gpu-memory-utilization: the share of device memory the plan may use.",
                p.utilization);
  const std::pair<const char*, std::pair<const char*, int64_t>> plan[] = {
      {"syv_memory_plan_budget_bytes",
       {"Device memory the plan may use (total x utilization).", p.budget_bytes}},
      {"syv_memory_plan_weight_bytes", {"Weights as the device holds them.", p.weight_bytes}},
      {"syv_memory_plan_activation_bytes",
       {"One step's activations, estimated for the token budget.", p.activation_bytes}},
      {"syv_memory_plan_runtime_reserve_bytes",
       {"Reserved for the CUDA context, libraries and the backend's scratch.",
        p.runtime_reserve_bytes}},
      {"syv_memory_plan_state_bytes",
       {"Recurrent-state slots reserved before the KV pool (hybrid models; 0 otherwise).",
        p.state_bytes}},
  };
  for (const auto& [name, what] : plan)
    append_metric(out, name, "gauge", what.first, static_cast<double>(what.second));
}

}  // namespace syv::server
