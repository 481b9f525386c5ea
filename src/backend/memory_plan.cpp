#include "backend/memory_plan.h"

#include <algorithm>
#include <sstream>

#include "backend/moe_scratch.h"

namespace syv {

std::string MemoryPlan::summary() const {
  std::ostringstream s;
  s << "KV pool: " << tokens << " tokens (" << pages << " pages of " << page_size << "), "
    << bytes_per_token << " bytes/token, max context " << max_context;
  if (state_slots > 0) {
    s << "; recurrent state: " << state_slots << " slots x " << (state_bytes / state_slots) / 1e6
      << " MB = " << state_bytes / 1e9 << " GB";
  }
  return s.str();
}

Result<MemoryPlan> plan_memory(const MemoryPlanInput& in) {
  if (!(in.utilization > 0.0 && in.utilization <= 1.0)) {
    std::ostringstream s;
    s << "--gpu-memory-utilization: expected a fraction in (0, 1], found " << in.utilization;
    return Status::Error(s.str());
  }
  if (in.kv_bytes_per_token <= 0 || in.page_size <= 0)
    return Status::Error("memory plan: kv_bytes_per_token and page_size must be positive");
  MemoryPlan p;
  p.page_size = in.page_size;
  p.bytes_per_token = in.kv_bytes_per_token;
  p.budget_bytes = static_cast<size_t>(static_cast<double>(in.total_bytes) * in.utilization);
  p.state_slots = in.state_slots;
  p.state_bytes = in.state_slots * in.state_bytes_per_slot;
  const size_t used = in.weight_bytes + in.activation_peak_bytes + in.other_bytes +
                      static_cast<size_t>(p.state_bytes);
  const size_t page_bytes = static_cast<size_t>(in.kv_bytes_per_token) * in.page_size;
  if (used + page_bytes > p.budget_bytes) {
    std::ostringstream s;
    s << "memory plan: weights " << in.weight_bytes << " B + activations "
      << in.activation_peak_bytes << " B + runtime " << in.other_bytes << " B + recurrent state "
      << p.state_bytes << " B (" << p.state_slots << " slots) leave no room for one " << page_bytes
      << "-byte KV page in " << p.budget_bytes << " B (" << in.utilization << " of "
      << in.total_bytes << " B); raise --gpu-memory-utilization or use a smaller model";
    return Status::Error(s.str());
  }
  p.pages = static_cast<int64_t>((p.budget_bytes - used) / page_bytes);
  p.tokens = p.pages * in.page_size;
  p.kv_bytes = p.tokens * in.kv_bytes_per_token;
  p.max_context = in.max_position > 0 ? std::min(p.tokens, in.max_position) : p.tokens;
  return p;
}

size_t estimate_qwen3_activation_bytes(int64_t tokens, int64_t hidden, int64_t q_dim,
                                       int64_t kv_dim, int64_t intermediate, int64_t vocab,
                                       int64_t logit_rows) {
  const int64_t per_token = 3 * hidden + 2 * q_dim + 2 * kv_dim + 3 * intermediate;  // bf16 rows
  return static_cast<size_t>(tokens * per_token * 2 + logit_rows * (hidden * 2 + vocab * 4));
}

size_t estimate_gdn_phases_scratch_bytes(int64_t tokens, int64_t value_heads,
                                         int64_t value_head_dim, int64_t spare_chunks) {
  if (value_heads <= 0 || tokens <= 0) return 0;
  const int64_t chunks = gdn_phases_max_chunks(tokens, spare_chunks);
  const int64_t per_chunk_head =
      kGdnChunkTokens * (2 * value_head_dim + 3 * 128) * 4 + 4;  // + Γ_last
  // The chunk table (16 bytes a chunk), each sequence's first chunk (at most one a token) and
  // the 256-byte alignment of the scratch's nine arrays.
  return static_cast<size_t>(chunks * value_heads * per_chunk_head + chunks * 16 +
                             (tokens + 1) * 4 + 9 * 256);
}

size_t estimate_moe_scratch_bytes(int64_t tokens, int64_t top_k, int64_t experts, int64_t hidden,
                                  int64_t moe_inter) {
  if (experts <= 0 || tokens <= 0) return 0;
  return cuda::moe_scratch_bytes({tokens, top_k, experts, hidden, moe_inter});
}

}  // namespace syv
