#include "cli/memory_plan_cli.h"

#include <algorithm>
#include <cstdio>

#include "backend/memory_plan.h"
#include "cli/kv_pool_plan.h"
#include "engine/engine_core.h"
#include "model/registry.h"
#if SYV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace syv::cli {

Result<std::string> describe_memory_plan(const PlanArgs& args, const ModelConfig& c,
                                         int64_t weight_bytes, int64_t scratch_bytes) {
  MemoryPlanInput in;
  if (args.gpu_memory_gib > 0) {
    in.total_bytes = static_cast<size_t>(args.gpu_memory_gib * 1073741824.0);
  } else {
#if SYV_HAVE_CUDA
    if (cuda_device_count() > 0) in.total_bytes = cuda_device_total_memory(0);
#endif
    if (in.total_bytes == 0)
      return Status::Error(
          "--gpu-memory-utilization: no CUDA device here; give its memory with --gpu-memory-gib");
  }
  in.utilization = args.utilization;
  if (args.host_embeddings) {  // as load_model keeps it: off the device (LoadOptions)
    if (c.tie_word_embeddings) {
      return Status::Error(
          "--host-embeddings: the config ties lm_head to embed_tokens (tie_word_embeddings: "
          "true), so the table stays on the device");
    }
    weight_bytes -= 2 * c.vocab_size * c.hidden_size;
  }
  in.weight_bytes = static_cast<size_t>(weight_bytes);
  const ModelArch* arch = find_model_arch(c.model_type);
  if (arch == nullptr)
    return Status::Error("memory plan: model_type \"" + c.model_type +
                         "\" is not served by this build");
  SYV_RETURN_IF_ERROR(arch->validate(c));
  // K/V in bf16 (CUDA's activation dtype) unless --kv-cache-dtype says otherwise.
  const CacheSpec spec = arch->cache_spec(c, args.kv_dtype.value_or(DType::BF16));
  // serve's defaults, with the sequences, drafts and hybrid state flags of the arguments
  EngineOptions engine;
  engine.max_num_seqs = static_cast<int32_t>(args.max_num_seqs);
  engine.max_num_batched_tokens = static_cast<int32_t>(args.max_batch_tokens);
  engine.num_speculative_tokens = args.num_speculative_tokens;
  engine.state_dtype = args.state_dtype;
  engine.num_checkpoints = args.num_checkpoints;
  engine.checkpoint_cache_bytes = args.checkpoint_cache_mb << 20;
  in.kv_bytes_per_token = spec.kv_bytes_per_token;
  in.state_bytes_per_slot = engine_cache_spec(spec, engine).state_bytes_per_seq;
  in.state_slots = engine_state_slots(spec, engine);
  engine.max_prompt_logprob_rows =
      planned_prompt_logprob_rows(engine, static_cast<int64_t>(in.total_bytes), c.vocab_size);
  in.activation_peak_bytes = estimate_step_activation_bytes(c, engine);
  in.other_bytes = runtime_reserve_bytes(static_cast<size_t>(scratch_bytes));
  in.page_size = 64;
  in.max_position = c.max_position_embeddings;
  auto plan = plan_memory(in);
  if (!plan.ok()) return plan.status();
  char buf[400];
  std::snprintf(
      buf, sizeof buf,
      " (KV %s; device %.1f GiB x %.2f; weights %.2f GB%s; runtime reserve %.2f GB, %.2f GB of "
      "it CUDA scratch; activations %.2f GB estimated for %lld batch tokens and %d prompt-logprob "
      "rows)",
      std::string(dtype_name(spec.kv_layers.empty() ? DType::BF16 : spec.kv_layers.front().dtype))
          .c_str(),
      in.total_bytes / 1073741824.0, in.utilization, in.weight_bytes / 1e9,
      args.host_embeddings ? " on the device, the embedding table in host memory" : "",
      in.other_bytes / 1e9, scratch_bytes / 1e9, in.activation_peak_bytes / 1e9,
      static_cast<long long>(std::max(args.max_batch_tokens, args.max_num_seqs)),
      engine.max_prompt_logprob_rows);
  return plan->summary() + buf;
}

}  // namespace syv::cli
