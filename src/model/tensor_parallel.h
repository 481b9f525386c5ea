// Tensor parallelism (issue 21), its first part: the sharding math of a dense Qwen3, Qwen3.5 or
// Qwen3-Next model (MoE included) over N ranks, each rank a DecoderModel on a backend of its own
// with its shard of every weight, of the KV cache and of the recurrent state, driven as one Model
// (one engine, one scheduler, unchanged).
//
//   q|k|v, gate|up,    column-parallel: rank r holds the rows of its query heads (and of its KV
//   GDN q|k|v|z|b|a    heads), of its slice of the intermediate size, of its Gated DeltaNet value
//   and conv channels  heads (and the key heads they read); A_log, dt_bias likewise
//   o, down, GDN out   row-parallel: the matching columns; each rank's output is a partial sum,
//                      all-reduced (TpComm) before the residual add; a bias is added by rank 0
//   MoE                every expert and the shared expert split by their intermediate size like
//                      the dense MLP; router and shared-expert gate replicated (every rank routes
//                      alike); one all-reduce of the block's output
//   KV / GDN key heads split (count % N == 0) or replicated (N % count == 0: rank r keeps head
//                      r / (N / count), the one its query / value heads read)
//   norms, embedding,  replicated (every rank computes the whole residual stream and the same
//   lm_head            logits; a vocabulary-parallel lm_head is the obvious next saving)
//
// TpComm (backend/tp_comm.h) is the all-reduce, handed to each rank by a TpGroup: HostTpGroup
// below for N simulated ranks (the CPU: a barrier, then every rank sums the N partials in rank
// order, so every rank gets the same bits), or NCCL over one GPU per rank (backend/cuda/
// nccl_tp_group.h). Each rank has a cache store of its own, a mirror of the engine's
// (CacheStore::add_mirror), so the engine's slot and checkpoint copies reach every rank. Not
// supported yet, and refused: pre-quantized weights, head counts or intermediate
// sizes N does not divide. CUDA graphs: every rank captures its own forward, all at once on the
// rank threads (a capture's eager warm-up runs the all-reduces, which must meet), and the model's
// graph hooks (model.h) stage, replay and destroy every rank's graph in step. The host tier
// copies every rank's part of a page (CacheStore's external copies fan out to the mirrors). The
// MTP head splits like a full-attention layer (fc and norms replicated); mtp_forward() copies its
// hidden input from rank 0 to the others through the host, so the head is not captured
// (supports_mtp_graphs() is false: it runs eagerly beside the model's graphs). Expert parallelism
// (whole experts per rank) is not tried.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/tp_comm.h"
#include "core/status.h"
#include "model/decoder.h"
#include "model/prepare_model.h"

namespace syv {

// N ranks in one process, one thread each (see above).
class HostTpGroup final : public TpGroup {
 public:
  explicit HostTpGroup(int size);
  ~HostTpGroup() override;
  HostTpGroup(const HostTpGroup&) = delete;
  HostTpGroup& operator=(const HostTpGroup&) = delete;
  int size() const override;
  TpComm& comm(int rank) override;
  std::string describe() const override;

 private:
  struct Shared;
  class Comm;
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Comm>> comms_;
};

// Whether `config` can be split over `size` ranks; the error names the field, its value and
// what would divide.
Status check_tensor_parallel(const ModelConfig& config, int size);

// A rank's config: its query heads, KV heads (at least 1), intermediate size and GDN key (at
// least 1) and value heads.
ModelConfig tensor_parallel_rank_config(const ModelConfig& config, int size);

// Rank `rank`'s shard of `full` (dense weights of a qwen3 or qwen3_5 model of `config`), on
// `backend`.
Result<DecoderWeights> shard_decoder_weights(const DecoderWeights& full, Backend& full_backend,
                                             const ModelConfig& config, int rank, int size,
                                             Backend& backend);

// Loads `prepared` (qwen3 or qwen3_5) once on backends[0] and splits it over the backends, one
// rank each (every weight passes through the host on its way to its rank, so ranks on different
// GPUs need no peer access; backends[0] holds the whole model and its own shard while it loads).
// `group` is the all-reduce of backends.size() ranks, rank r's on backends[r]; null: a HostTpGroup
// (simulated ranks). The Model reports the full config, the rank's cache spec (every rank keeps its
// KV heads for every token of the engine's pool, its GDN heads' state for every slot), and rank
// 0's backend; forward() runs every rank (ranks 1.. on threads of their own, each made current on
// its backend's device first) and returns rank 0's outputs. bind_cache() builds the other ranks'
// stores like the engine's and mirrors them (binding the same store again keeps them). It
// supports_graphs() when every rank does: capture_forward() captures every rank's forward (rank
// 0's followed by `then`) on the rank threads at once and returns one id for them all;
// stage_graph_batch(), replay_graph() and destroy_graph() run on every rank's thread (its device
// current), set_fixed_max_context() sets every rank's backend. Errors name what cannot be split.
Result<std::unique_ptr<Model>> load_tensor_parallel(const PreparedModel& prepared,
                                                    const std::vector<Backend*>& backends,
                                                    const LoadOptions& options,
                                                    std::unique_ptr<TpGroup> group = nullptr);

}  // namespace syv
