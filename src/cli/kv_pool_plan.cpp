#include "cli/kv_pool_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "backend/memory_plan.h"
#include "cli/step_budget.h"
#include "core/log.h"
#include "engine/engine_core.h"

#if SYV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace syv::cli {

size_t estimate_step_activation_bytes(const ModelConfig& c, const EngineOptions& e) {
  const int64_t step_tokens = std::max(e.max_num_batched_tokens, e.max_num_seqs);
  const size_t dense = estimate_qwen3_activation_bytes(
      step_tokens, c.hidden_size, c.num_attention_heads * c.head_dim,
      c.num_key_value_heads * c.head_dim, c.intermediate_size, c.vocab_size,
      std::min<int64_t>(e.max_num_seqs * (1 + e.num_speculative_tokens), step_tokens) +
          prompt_logprob_rows(e));
  return dense +
         estimate_gdn_phases_scratch_bytes(
             step_tokens, c.linear_num_value_heads, c.linear_value_head_dim,
             gdn_phases_spare_chunks(e.max_num_seqs, e.num_speculative_tokens)) +
         estimate_moe_scratch_bytes(step_tokens, c.num_experts_per_tok, c.num_experts,
                                    c.hidden_size, c.moe_intermediate_size);
}

namespace {

#if SYV_HAVE_CUDA
struct PlannedPool {
  int64_t kv_bytes = 0;
  // The prompt-logprob rows the plan counted (EngineOptions::max_prompt_logprob_rows).
  int32_t prompt_logprob_rows = 0;
  server::MemoryPlanFacts facts;
};

Result<PlannedPool> plan_kv_pool_bytes(CudaBackend& gpu, Model& model, const EngineOptions& e,
                                       const GpuMemoryShare& share) {
  const double utilization = share.utilization;
  // A draft model's pool has as many pages as the target's: plan both, return the target's share.
  const int64_t target_kv = engine_cache_spec(model.cache_spec(), e).kv_bytes_per_token;
  const int64_t draft_kv = e.draft_model ? e.draft_model->cache_spec().kv_bytes_per_token : 0;
  const ModelConfig& c = model.config();
  MemoryPlanInput in;
  in.total_bytes = gpu.memory_info().total_bytes;
  if (share.memory_gib > 0) {
    const auto capped = static_cast<size_t>(share.memory_gib * 1073741824.0);
    if (capped > in.total_bytes) {
      char why[160];
      std::snprintf(why, sizeof why,
                    "--gpu-memory-gib %.2f: the device has %.2f GiB; give at most that, or leave "
                    "it out",
                    share.memory_gib, in.total_bytes / 1073741824.0);
      return Status::Error(why);
    }
    in.total_bytes = capped;
  }
  in.utilization = utilization;
  // The weights alone: the backend's scratch (the load's dequantization buffer, the cuBLASLt
  // workspace) is in the runtime reserve below (it was counted in both until 2026-12-05).
  in.weight_bytes = gpu.allocated_bytes() - gpu.peak_scratch_bytes();
  const int64_t step_tokens = std::max(e.max_num_batched_tokens, e.max_num_seqs);
  EngineOptions planned = e;
  planned.max_prompt_logprob_rows =
      planned_prompt_logprob_rows(e, static_cast<int64_t>(in.total_bytes), c.vocab_size);
  in.activation_peak_bytes = estimate_step_activation_bytes(c, planned);
  in.other_bytes = runtime_reserve_bytes(gpu.peak_scratch_bytes());
  in.kv_bytes_per_token = target_kv + draft_kv;
  in.state_bytes_per_slot = engine_cache_spec(model.cache_spec(), e).state_bytes_per_seq;
  in.state_slots = engine_state_slots(model.cache_spec(), e);
  in.page_size = e.page_size;
  in.max_position = c.max_position_embeddings;
  SYV_ASSIGN_OR_RETURN(MemoryPlan plan, plan_memory(in));
  SYV_LOG(INFO) << "memory plan: " << plan.summary() << " (device " << in.total_bytes / 1073741824.0
                << " GiB" << (share.memory_gib > 0 ? " (--gpu-memory-gib)" : "") << " x "
                << utilization << "; weights " << in.weight_bytes / 1e9 << " GB; runtime reserve "
                << in.other_bytes / 1e9 << " GB, " << gpu.peak_scratch_bytes() / 1e9
                << " GB of it the backend's scratch; activations " << in.activation_peak_bytes / 1e9
                << " GB estimated for " << step_tokens << " batch tokens and "
                << planned.max_prompt_logprob_rows
                << " prompt-logprob rows; --kv-cache-mb overrides"
                << (draft_kv > 0 ? "; the draft model's KV pool included" : "") << ")";
  PlannedPool out;
  out.kv_bytes = plan.kv_bytes / (target_kv + draft_kv) * target_kv;
  out.prompt_logprob_rows = planned.max_prompt_logprob_rows;
  out.facts = {utilization,
               static_cast<int64_t>(plan.budget_bytes),
               static_cast<int64_t>(in.weight_bytes),
               static_cast<int64_t>(in.activation_peak_bytes),
               static_cast<int64_t>(in.other_bytes),
               plan.state_bytes};
  return out;
}
#endif

}  // namespace

void choose_step_budget(Backend& backend, const ModelConfig& config, int tensor_parallel,
                        bool budget_given, EngineOptions* options) {
  if (budget_given) return;
#if SYV_HAVE_CUDA
  auto* gpu = dynamic_cast<CudaBackend*>(&backend);
  if (gpu == nullptr) return;
  auto keep = [&](const std::string& why) {
    SYV_LOG(INFO) << "step budget: " << options->max_num_batched_tokens << " tokens (" << why
                  << "; --max-batched-tokens sets it)";
  };
  Result<double> flops = prefill_flops_per_token(config, tensor_parallel);
  if (!flops.ok()) return keep("not chosen: " + flops.message());
  constexpr int64_t kGemmSide = 8192;
  constexpr size_t kGemmBytes = 3 * kGemmSide * kGemmSide * 2;
  if (gpu->memory_info().free_bytes < size_t{1} << 30)
    return keep("not chosen: under 1 GiB free to measure the GEMM rate");
  const auto t0 = std::chrono::steady_clock::now();
  const double tflops = gpu->measure_gemm_tflops(kGemmSide, kGemmSide, kGemmSide, 10);
  const double measure_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  options->max_num_batched_tokens = step_budget_for(*flops, tflops * 1e12);
  char why[320];
  std::snprintf(why, sizeof why,
                "chosen: the largest multiple of %d, within %d-%d, whose chunk's linears (%.2f "
                "GFLOP a token) compute in %.0f ms at this GPU's %.0f TFLOP/s, measured now in "
                "%.2f s with %zu MB",
                kStepBudgetQuantum, kStepBudgetMin, kStepBudgetMax, *flops / 1e9,
                kStepComputeBoundS * 1e3, tflops, measure_s, kGemmBytes >> 20);
  keep(why);
#else
  (void)backend;
  (void)config;
  (void)tensor_parallel;
  (void)options;
#endif
}

Result<std::optional<server::MemoryPlanFacts>> size_kv_pool(Backend& backend, Model& model,
                                                            EngineOptions* options,
                                                            bool pool_flag_given,
                                                            const GpuMemoryShare& share) {
  std::optional<server::MemoryPlanFacts> facts;
#if SYV_HAVE_CUDA
  if (!pool_flag_given && options->num_pages == 0) {
    if (auto* gpu = dynamic_cast<CudaBackend*>(&backend)) {
      Result<PlannedPool> pool = plan_kv_pool_bytes(*gpu, model, *options, share);
      if (!pool.ok()) return Status::Error("--gpu-memory-utilization: " + pool.message());
      options->kv_cache_bytes = pool->kv_bytes;
      options->max_prompt_logprob_rows = pool->prompt_logprob_rows;
      facts = pool->facts;
    }
  }
#else
  (void)model;
#endif
  if (share.given && !facts) {
    const bool sized = pool_flag_given || options->num_pages > 0;
    SYV_LOG(WARN) << "--gpu-memory-utilization / --gpu-memory-gib: not used ("
                  << (sized ? "--kv-cache-mb / --num-pages size the pool"
                            : "the " + backend.name() + " backend's pool is --kv-cache-mb")
                  << ")";
  }
  return facts;
}

}  // namespace syv::cli
