// The engine's step budget (--max-batched-tokens) chosen from the GPU and the model when the flag
// is not given: a step that carries a full prefill chunk holds every running sequence's next
// token for as long as the chunk computes, so the budget is the largest chunk whose linears
// compute within kStepComputeBoundS at the device's measured GEMM rate, in multiples of
// kStepBudgetQuantum within [kStepBudgetMin, kStepBudgetMax]. A dense 8B model on an H100 or
// H200 stays at 2,048 tokens; small and mixture-of-experts models, whose chunks compute fast,
// take larger ones (docs/configuration.md "Step budget").
#pragma once

#include <cstdint>

#include "core/status.h"
#include "io/model_config.h"

namespace syv::cli {

constexpr double kStepComputeBoundS = 0.050;  // a full chunk's linears at the GEMM rate, at most
constexpr int32_t kStepBudgetMin = 2048;      // the fixed default before 2026-12-07
constexpr int32_t kStepBudgetMax = 16384;     // the throughput preset's
constexpr int32_t kStepBudgetQuantum = 1024;

// The linears' FLOPs of one prompt token: 2 x the parameters it runs through, from the model's
// tensor list (model/prepare_model.h config_weight_specs): every weight but the embedding table,
// the lm_head (a prefill computes logits for its sampled rows only) and the MTP head, with only
// top_k of the routed experts of each MoE layer. Divided among `tensor_parallel` ranks. An error
// for a model_type whose tensor list is not known without a checkpoint.
Result<double> prefill_flops_per_token(const ModelConfig& c, int tensor_parallel = 1);

// The budget for a token costing `flops_per_token` on a device computing `gemm_flops_per_s`
// (kStepBudgetMin when either is not positive).
int32_t step_budget_for(double flops_per_token, double gemm_flops_per_s);

}  // namespace syv::cli
