// Plain fp32 CPU implementations of the hybrid ops of backend.h (Gated DeltaNet, gated attention,
// MoE). Free functions so the CPU backend forwards to them and unit tests call them directly.
// Activations (x, qkv, out...) are f32; weights may be f32, bf16 or f16; states are f32.
#pragma once

#include <cstdint>
#include <functional>

#include "backend/backend.h"

namespace syv::cpu {

// Called with a linear product's input x [T, K] (f32) and weight w [N, K] before the product
// (CpuBackend::set_linear_observer). Empty: nothing is called.
using LinearObserver = std::function<void(const Tensor& x, const Tensor& w)>;

// See Backend::causal_conv1d_silu.
void causal_conv1d_silu(const Tensor& x, const Tensor& weight, Tensor& conv_state, Tensor& save_to,
                        const BatchMeta& meta, Tensor& out);

// See Backend::gated_delta_rule (recurrent form, one token at a time).
void gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log,
                      const Tensor& dt_bias, const GdnShape& shape, Tensor& state, Tensor& save_to,
                      const BatchMeta& meta, Tensor& out);

// See Backend::gated_rmsnorm.
void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out);

// See Backend::sigmoid_mul.
void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out);

// See Backend::moe_topk.
void moe_topk(const Tensor& logits, int32_t top_k, bool renormalize, Tensor& ids, Tensor& weights);

// See Backend::moe_experts.
// batch_invariant: the expert linears take linear_invariant() (rows independent of the batch).
// observe: called per expert that has tokens, with the rows routed to it and its slice of gate_up
// ([2I, H], at gate_up's data + e * 2I * H elements), then their activations and its slice of down
// ([H, I]); a weight's slices are what the loader notes as each expert's sources.
void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, Tensor& out, bool batch_invariant = false,
                 const LinearObserver& observe = {});

}  // namespace syv::cpu
