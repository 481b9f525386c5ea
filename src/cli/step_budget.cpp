#include "cli/step_budget.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/prepare_model.h"
#include "model/weight_spec.h"

namespace syv::cli {

Result<double> prefill_flops_per_token(const ModelConfig& c, int tensor_parallel) {
  SYV_ASSIGN_OR_RETURN(std::vector<WeightSpec> specs, config_weight_specs(c));
  double parameters = 0, routed = 0;
  for (const WeightSpec& w : specs) {
    const std::string& n = w.name;
    if (n.rfind("mtp.", 0) == 0 || n.find("embed_tokens") != std::string::npos ||
        n.find("lm_head") != std::string::npos)
      continue;
    parameters += static_cast<double>(w.numel());
    if (n.find(".mlp.experts.") != std::string::npos) routed += static_cast<double>(w.numel());
  }
  if (c.num_experts > 0) {
    const double used = static_cast<double>(c.num_experts_per_tok) / c.num_experts;
    parameters -= routed * (1.0 - std::min(used, 1.0));
  }
  return 2.0 * parameters / std::max(tensor_parallel, 1);
}

int32_t step_budget_for(double flops_per_token, double gemm_flops_per_s) {
  if (!(flops_per_token > 0) || !(gemm_flops_per_s > 0)) return kStepBudgetMin;
  const double tokens = kStepComputeBoundS * gemm_flops_per_s / flops_per_token;
  const double quanta = std::floor(std::min(tokens, double{kStepBudgetMax}) / kStepBudgetQuantum);
  return std::clamp(static_cast<int32_t>(quanta) * kStepBudgetQuantum, kStepBudgetMin,
                    kStepBudgetMax);
}

}  // namespace syv::cli
