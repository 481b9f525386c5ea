// Default bodies of the hybrid ops (backend.h): a backend that does not implement one refuses
// loudly instead of computing something wrong. The CPU backend overrides all of them.
#include "backend/backend.h"
#include "core/check.h"

namespace syv {
namespace {

[[noreturn]] void not_implemented(const Backend& backend, const char* op) {
  SYV_FATAL() << "op " << op << " is not implemented on backend " << backend.name()
              << " (hybrid models need it; see backend.h, hybrid ops)";
}

}  // namespace

void Backend::causal_conv1d_silu(const Tensor&, const Tensor&, Tensor&, Tensor&, const BatchMeta&,
                                 Tensor&) {
  not_implemented(*this, "causal_conv1d_silu");
}

void Backend::gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const GdnShape&, Tensor&, Tensor&, const BatchMeta&, Tensor&) {
  not_implemented(*this, "gated_delta_rule");
}

void Backend::gated_rmsnorm(const Tensor&, const Tensor&, const Tensor&, float, Tensor&) {
  not_implemented(*this, "gated_rmsnorm");
}

void Backend::sigmoid_mul(const Tensor&, const Tensor&, Tensor&) {
  not_implemented(*this, "sigmoid_mul");
}

void Backend::moe_topk(const Tensor&, int32_t, bool, Tensor&, Tensor&) {
  not_implemented(*this, "moe_topk");
}

void Backend::moe_experts(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          Tensor&) {
  not_implemented(*this, "moe_experts");
}

}  // namespace syv
