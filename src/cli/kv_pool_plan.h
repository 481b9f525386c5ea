// The KV pool's bytes on a GPU, as vLLM sizes its pool: device total x utilization - weights (what
// the backend holds after loading) - one step's activations (estimated for the step budget) - the
// runtime reserve (backend/memory_plan.h, the plan `syv inspect` prints). Used by the commands that
// run the engine on a GPU without --kv-cache-mb / --num-pages (`syv serve`, `syv bench offline`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/status.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/deployment_facts.h"

namespace syv::cli {

// --gpu-memory-utilization and --gpu-memory-gib as given to serve / bench offline.
struct GpuMemoryShare {
  double utilization = 0.90;  // of the device total, 0.05..1
  // --gpu-memory-gib: the device total the plan takes, in GiB (0: the device's own, read by
  // cudaMemGetInfo); at most the device's. For sharing a GPU with other processes, or planning a
  // smaller card's pool on a larger one.
  double memory_gib = 0.0;
  bool given = false;  // either flag given on the command line (warned about when not used)
};

// One step's activation peak as the memory plans count it (serve's, bench offline's and syv
// inspect's: estimated, no step has run yet), for a step of max(max_num_batched_tokens,
// max_num_seqs) tokens: the rows of backend/memory_plan.h estimate_qwen3_activation_bytes with
// each sequence's verify rows and the prompt-logprob rows as logits rows, plus for hybrids the
// chunked delta rule's scratch (one layer's at a time) for the chunks a step of these sequences
// can make (gdn_phases_spare_chunks), and for MoE models the tiled path's scratch
// (estimate_moe_scratch_bytes).
size_t estimate_step_activation_bytes(const ModelConfig& c, const EngineOptions& e);

// The pool of an engine about to run on `backend`: sized by the plan (`share`) on a CUDA backend
// when neither --kv-cache-mb nor --num-pages was given (`pool_flag_given`), else left as `options`
// has it (a warning says the flags are not used when share.given). The target's share when
// options->draft_model is set (both pools get as many pages). Sets options->kv_cache_bytes and,
// where it was 0, options->max_prompt_logprob_rows (the rows the plan counted:
// planned_prompt_logprob_rows), and logs the plan; returns the plan's facts when the plan sized
// the pool. Fails with the plan's message when the weights, activations and reserve leave no
// room for one sequence, or when --gpu-memory-gib exceeds the device.
// The step budget of an engine about to run on `backend` when --max-batched-tokens was neither
// given nor set by a preset (`budget_given`): on a CUDA backend, measures the GEMM rate (an
// 8192^3 bf16 GEMM, 0.14 s on an H100; 384 MB for the moment, skipped below 1 GiB free) and sets
// options->max_num_batched_tokens to cli/step_budget.h's step_budget_for() of the model's
// prefill FLOPs a token on one of `tensor_parallel` ranks; logs the choice and why. Elsewhere (the
// CPU backend, a model whose tensor list is not known, too little free memory) leaves it (2048).
// Before size_kv_pool(): the plan counts the chosen step's activations.
void choose_step_budget(Backend& backend, const ModelConfig& config, int tensor_parallel,
                        bool budget_given, EngineOptions* options);

Result<std::optional<server::MemoryPlanFacts>> size_kv_pool(Backend& backend, Model& model,
                                                            EngineOptions* options,
                                                            bool pool_flag_given,
                                                            const GpuMemoryShare& share);

}  // namespace syv::cli
