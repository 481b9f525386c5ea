// A language model written once against backend ops. The engine drives it through this interface.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/batch.h"
#include "core/status.h"
#include "io/model_config.h"
#include "model/cache_spec.h"

namespace syv {

struct LoadOptions {
  bool random_weights = false;  // build from config.json alone (benchmarks at real shapes)
  uint64_t seed = 0;            // for random weights
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  virtual CacheSpec cache_spec() const = 0;
  virtual Backend& backend() = 0;

  // Allocates the KV pages, state slots and checkpoints. Must be called before forward().
  virtual Status allocate_cache(const CacheConfig& cache) = 0;
  virtual const CacheConfig& cache_config() const = 0;

  // Runs the batch: writes K/V of the new tokens into their pages, advances recurrent states, and
  // returns fp32 logits [batch.logit_rows.size(), vocab] in backend memory, valid until the next
  // forward(). Preconditions: pages for every position < context_lens are mapped in page_table.
  virtual Tensor forward(const Batch& batch) = 0;

  // CUDA graphs (engine/graph_runner.h). Whether forward() may be captured into a graph: every
  // buffer it touches stays put between calls and its host-side decisions follow only the batch's
  // shape. Qwen3 asks its backend; the default (hybrid models: recurrent state, CPU-only ops) is
  // false.
  virtual bool supports_graphs() const { return false; }
  // Allocates the activation buffers for batches of up to `max_tokens` tokens and
  // `max_logit_rows` logits rows now, at full size, so no later forward() reallocates a buffer a
  // captured graph points at (a larger forward() afterwards is a CHECK failure). Growing a
  // reservation is allowed; reserve(0, 0) ends it. The default does nothing.
  virtual void reserve(int64_t max_tokens, int64_t max_logit_rows) {
    (void)max_tokens;
    (void)max_logit_rows;
  }

  // Recurrent-state management (no-ops for models without recurrent layers).
  virtual void reset_state(int32_t slot) = 0;                          // zero state
  virtual void save_checkpoint(int32_t slot, int32_t checkpoint) = 0;  // slot -> checkpoint
  virtual void load_checkpoint(int32_t checkpoint, int32_t slot) = 0;  // checkpoint -> slot
};

// Loads a Hugging Face model folder (config.json + *.safetensors), dispatching on model_type.
Result<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend,
                                          const LoadOptions& options = {});

}  // namespace syv
