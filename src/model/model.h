// A language model written once against backend ops. The engine drives it through this interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/batch.h"
#include "core/status.h"
#include "io/model_config.h"
#include "kv/cache_spec.h"
#include "kv/cache_store.h"
#include "model/weight_spec.h"

namespace syv {

struct LoadOptions {
  bool random_weights = false;  // build from config.json alone (benchmarks at real shapes)
  uint64_t seed = 0;            // for random weights
  // Also load the checkpoint's multi-token-prediction head (mtp.* tensors of Qwen3.5 / Qwen3-Next
  // with mtp_num_hidden_layers = 1; random ones with random_weights) for MTP speculative
  // decoding: the model then has_mtp() and its cache_spec() ends with one more paged-KV layer,
  // the head's. Off: mtp.* tensors are ignored, the model is exactly as without them. Models
  // without such a head refuse it at load.
  bool mtp = false;
  // --host-embeddings: the input embedding table in host-resident memory (the device reads the
  // rows a step looks up over the bus; WeightLoader::keep_embeddings_on_host), which frees its
  // bytes for the KV pool. Untied embeddings only: a model that ties lm_head to the table refuses
  // it at load, as does tensor parallelism.
  bool host_embeddings = false;
  // Where non-null, filled with the checkpoint tensors each loaded weight holds rows of
  // (WeightLoader::record_sources): `syv quantize --calibration-file`.
  WeightSources* weight_sources = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  // The cache this model needs (pages per attention layer, state per recurrent layer); the engine
  // builds a CacheStore from it (kv/cache_store.h).
  virtual CacheSpec cache_spec() const = 0;
  virtual Backend& backend() = 0;

  // Binds the engine-owned cache that forward() reads and writes: a store built from this
  // model's cache_spec() on this model's backend. Must be called before forward(); the store must
  // outlive every later forward(). Binding another store is allowed while no CUDA graph holds the
  // old one's addresses (GraphRunner binds nothing: the engine binds once, before any capture).
  virtual void bind_cache(CacheStore& store) = 0;

  // What forward() produces, in backend memory, valid until the next forward().
  struct Outputs {
    Tensor logits;  // fp32 [batch.logit_rows.size(), vocab]
    // [batch.logit_rows.size(), hidden_size], activation dtype: the final hidden state (after the
    // final norm: the lm_head's input) of each logits row, the input of an MTP draft head
    // (WAVE2-SPECS B.2). The decoder fills it at no cost (the head reads it anyway); empty where
    // a model has no such state (the test models).
    Tensor hidden;
    // [batch.num_tokens(), hidden_size]: the same final hidden state for every token of the
    // batch (the MTP head's input for the positions the target just computed); empty where a
    // model has none (the test models).
    Tensor token_hidden;
  };

  // Runs the batch: writes K/V of the new tokens into their pages, advances recurrent states, and
  // fills `out` (see Outputs). Preconditions: pages for every position < context_lens are mapped in
  // page_table; each sequence's state slot holds exactly its positions [0, first new position) (a
  // sequence starting at position 0 needs a zeroed slot: CacheStore::reset_slot(), which the engine
  // calls on admission; forward() makes no such decision itself, so a CUDA graph cannot freeze
  // one).
  virtual void forward(const Batch& batch, Outputs& out) = 0;
  // The logits alone (Outputs::logits). Subclasses keep it visible with `using Model::forward;`.
  Tensor forward(const Batch& batch) {
    Outputs out;
    forward(batch, out);
    return out.logits;
  }

  // The MTP draft head (model/mtp_head.h), loaded with LoadOptions::mtp; its K/V is the last
  // paged-KV layer of cache_spec().
  virtual bool has_mtp() const { return false; }
  // Runs the head: row i of `batch` is the pair (token x_{p+1}, hidden[i] = h_p) at position p;
  // `hidden` [T, H] (activation dtype, backend memory) is Outputs::token_hidden rows of the
  // target or a previous mtp_forward()'s out.hidden rows. Writes the head's K/V of the rows (the
  // head's K/V of earlier positions must be there), and fills out.logits / out.hidden (the draft
  // logits and the head's `out`, the next draft's hidden input) at batch.logit_rows, valid until
  // the next mtp_forward(); forward()'s outputs stay valid. Needs has_mtp() (CHECK failure).
  virtual void mtp_forward(const Batch& batch, const Tensor& hidden, Outputs& out);

  // ---- CUDA graphs (engine/graph_runner.h; Backend's "CUDA graphs" section) -------------------
  // Whether forward() may be captured into a graph: every buffer it touches stays put between
  // calls and its host-side decisions follow only the batch's shape. Qwen3 asks its backend; the
  // default (hybrid models: CPU-only ops) is false.
  virtual bool supports_graphs() const { return false; }
  // Whether the MTP drafter may capture mtp_forward() too, on backend() alone (its head graphs
  // use backend()'s capture_graph / stage_batch / replay_graph / destroy_graph directly). The
  // default: supports_graphs(). False where mtp_forward() synchronizes with the host or spans
  // several backends (tensor_parallel.h); the head then runs eagerly beside the model's graphs.
  virtual bool supports_mtp_graphs() const { return supports_graphs(); }

  // The graph hooks the engine (GraphRunner) and `syv bench decode` call instead of backend()'s,
  // so that a model over several backends (tensor_parallel.h) captures and replays on every one.
  // Each has its Backend namesake's contract; the defaults call backend()'s. Need
  // supports_graphs() (the backend's defaults abort otherwise).
  //
  // Captures forward(batch, out), then `then` (empty: nothing; e.g. an argmax of out.logits on
  // backend()'s stream), as one graph and returns its id (Backend::capture_graph: the step runs
  // once eagerly first, so `out` holds the outputs every replay rewrites). `batch` and `out` are
  // referenced, not copied: they must live, at the same addresses, until destroy_graph(id) (a
  // backend may re-run the step at each replay, reading the batch then).
  virtual int capture_forward(const Batch& batch, Outputs& out, const std::function<void()>& then);
  // Stages `batch` (the layout of the graph replayed next) for the next replay_graph().
  virtual void stage_graph_batch(const Batch& batch, int32_t page_size);
  // Launches graph `id` (a capture_forward() id) on the latest staged metadata; its outputs land
  // in the `out` it was captured with.
  virtual void replay_graph(int id);
  // Frees graph `id`; ids are not reused.
  virtual void destroy_graph(int id);
  // Backend::set_fixed_max_context() (0: per batch again), for eager forwards too.
  virtual void set_fixed_max_context(int64_t max_context);

  // Allocates the activation workspace for batches of up to `max_tokens` tokens and
  // `max_logit_rows` logits rows now, at full size, so no later forward() reallocates a buffer a
  // captured graph points at (a larger forward() afterwards is a CHECK failure). Growing a
  // reservation is allowed; reserve(0, 0) ends it. The default does nothing.
  virtual void reserve(int64_t max_tokens, int64_t max_logit_rows) {
    (void)max_tokens;
    (void)max_logit_rows;
  }
  // The same for mtp_forward()'s own workspace (the MTP drafter captures head forwards as
  // graphs); reserve_mtp(0, 0) ends it. The default does nothing.
  virtual void reserve_mtp(int64_t max_tokens, int64_t max_logit_rows) {
    (void)max_tokens;
    (void)max_logit_rows;
  }
};

// Builds a CacheStore of `config` for the model's cache_spec() on its backend and binds the model
// to it (what EngineCore::create does; tests, benchmarks and the CLI's single sequence use this).
// The caller owns the store and keeps it alive while the model runs on it.
Result<std::unique_ptr<CacheStore>> make_cache_store(Model& model, const CacheConfig& config);

// Loads a Hugging Face model folder (config.json + *.safetensors), dispatching on model_type
// through the model registry (model/registry.h): prepare_model() (every check that needs no
// allocation, the weights' memory included; model/prepare_model.h), then load_prepared_model().
Result<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend,
                                          const LoadOptions& options = {});

}  // namespace syv
