// `syv verify`'s deployment checks (cli/verify_checks.h): the build, the device, the KV pool
// and the memory plan, as the server's /metrics states them (server/deployment_facts.h), each
// checked for presence and consistency and stated in the PASS line, so that verify's output
// records what the deployment is.
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "cli/prometheus_text.h"
#include "cli/verify_checks.h"
#include "cli/verify_reply.h"

namespace syv::cli {
namespace {

using nlohmann::json;

// The labels of `name`'s only sample; empty when it has none or several.
std::map<std::string, std::string> info_labels(const std::string& text, const std::string& name) {
  const std::vector<PrometheusSample> samples = prometheus_samples(text, name);
  if (samples.size() != 1 || samples[0].value != 1) return {};
  return samples[0].labels;
}

std::string label(const std::map<std::string, std::string>& labels, const std::string& key) {
  auto it = labels.find(key);
  return it == labels.end() ? "" : it->second;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1 << 30));
  return text;
}

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1 << 20));
  return text;
}

// Gauges of /metrics read by name; a missing one is noted once and reads as -1.
struct Gauges {
  const std::string& text;
  std::string missing;
  double operator()(const char* name) {
    const double v = prometheus_sum(text, name);
    if (v < 0) missing += std::string(missing.empty() ? "" : ", ") + name;
    return v;
  }
};

}  // namespace

void Verifier::deployment() {
  const HttpReply r = client_->get("/metrics");
  if (r.status != 200) {
    check("deployment: GET /metrics states the build, device and KV pool", false, describe(r));
    return;
  }
  const std::string& text = r.body;

  const auto build = info_labels(text, "syv_build_info");
  const bool build_ok = !label(build, "version").empty() && !label(build, "git_commit").empty() &&
                        !label(build, "build_type").empty() && !label(build, "cuda").empty();
  check("deployment: /metrics states the build (syv_build_info)", build_ok,
        build_ok ? "syv " + label(build, "version") + ", commit " + label(build, "git_commit") +
                       ", " + label(build, "build_type") + ", " + label(build, "compiler") +
                       ", CUDA " + label(build, "cuda")
                 : "expected one syv_build_info sample with version, git_commit, build_type and "
                   "cuda labels");

  const auto device = info_labels(text, "syv_device_info");
  const std::string backend = label(device, "backend");
  const double memory = prometheus_sum(text, "syv_device_memory_bytes");
  // A GPU must be named and sized; the CPU's name and memory come from /proc and may be absent.
  const bool device_ok =
      !backend.empty() && (backend != "cuda" || (!label(device, "name").empty() && memory > 0));
  std::string where = backend;
  if (!label(device, "index").empty()) where.append(":").append(label(device, "index"));
  if (!label(device, "name").empty()) where.append(" ").append(json(label(device, "name")).dump());
  check("deployment: /metrics names the device (syv_device_info)", device_ok,
        device_ok ? where + (memory > 0 ? ", " + gib(memory) : std::string(", memory unknown"))
                  : "expected one syv_device_info sample naming its backend (a cuda device "
                    "also its name and syv_device_memory_bytes); got " +
                        (where.empty() ? std::string("none") : where));

  Gauges g{text, ""};
  const double pages = g("syv_kv_pool_pages"), page_size = g("syv_kv_page_size_tokens"),
               tokens = g("syv_kv_pool_tokens"), bytes_per_token = g("syv_kv_bytes_per_token"),
               max_len = g("syv_max_model_len"), max_seqs = g("syv_max_num_seqs"),
               step_tokens = g("syv_max_num_batched_tokens"), used = g("syv_kv_pages_used"),
               free_pages = g("syv_kv_pages_free");
  const auto cache = info_labels(text, "syv_kv_cache_info");
  const std::string dtype = label(cache, "dtype"), sized_by = label(cache, "sized_by");
  std::string problems;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) problems += (problems.empty() ? "" : "; ") + what;
  };
  expect(g.missing.empty(), "missing " + g.missing);
  expect(!dtype.empty() && !sized_by.empty(),
         "expected one syv_kv_cache_info sample with dtype and sized_by labels");
  expect(pages > 0 && page_size > 0 && bytes_per_token > 0,
         "the pool's pages, page size and bytes per token must be positive");
  expect(tokens == pages * page_size, "syv_kv_pool_tokens is not pages x page size");
  expect(used >= 0 && free_pages >= 0 && used + free_pages == pages,
         "syv_kv_pages_used + syv_kv_pages_free is not syv_kv_pool_pages");
  expect(max_len > 0 && max_len <= tokens,
         "max_model_len " + std::to_string(static_cast<int64_t>(max_len)) +
             " does not fit the pool (a request that long would be refused)");
  expect(max_model_len_ < 0 || max_len == static_cast<double>(max_model_len_),
         "syv_max_model_len differs from GET /v1/models' max_model_len " +
             std::to_string(max_model_len_));
  expect(max_seqs >= 1 && step_tokens >= 1, "max_num_seqs and max_num_batched_tokens must be >= 1");
  char pool[320];
  std::snprintf(
      pool, sizeof pool,
      "KV pool %.0f tokens (%.0f pages of %.0f), %s, %.0f bytes/token = %s, sized by "
      "%s; max_model_len %.0f (the pool holds %.0f sequence(s) that long), max_num_seqs %.0f, "
      "%.0f tokens a step",
      tokens, pages, page_size, dtype.c_str(), bytes_per_token,
      mib(tokens * bytes_per_token).c_str(), sized_by.c_str(), max_len,
      max_len > 0 ? std::floor(tokens / max_len) : 0.0, max_seqs, step_tokens);
  std::string detail = pool;
  if (sized_by == "gpu-memory-utilization") {
    // The plan (backend/memory_plan.h): weights + activations + reserve + state + the pool fit
    // in the budget, and the budget is the device's memory x the utilization.
    Gauges p{text, ""};
    const double util = p("syv_memory_plan_utilization"),
                 budget = p("syv_memory_plan_budget_bytes"),
                 weights = p("syv_memory_plan_weight_bytes"),
                 activations = p("syv_memory_plan_activation_bytes"),
                 reserve = p("syv_memory_plan_runtime_reserve_bytes"),
                 state = p("syv_memory_plan_state_bytes");
    expect(p.missing.empty(), "sized by the memory plan, but missing " + p.missing);
    expect(util > 0 && util <= 1, "syv_memory_plan_utilization outside (0, 1]");
    expect(memory > 0 && std::fabs(budget - std::floor(memory * util)) <= 1,
           "the plan's budget is not the device's memory x the utilization");
    const double kv = tokens * bytes_per_token;
    expect(weights + activations + reserve + state + kv <= budget,
           "weights + activations + reserve + state + the KV pool exceed the plan's budget");
    char plan[256];
    std::snprintf(plan, sizeof plan,
                  "; memory plan: %.2f of %s = %s for weights %s + activations %s + reserve %s "
                  "+ state %s + KV %s",
                  util, gib(memory).c_str(), gib(budget).c_str(), gib(weights).c_str(),
                  gib(activations).c_str(), gib(reserve).c_str(), gib(state).c_str(),
                  gib(kv).c_str());
    detail += plan;
  }
  check("deployment: /metrics states the KV pool and memory plan, consistent", problems.empty(),
        problems.empty() ? detail : problems + " (" + detail + ")");
}

}  // namespace syv::cli
