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
// TpComm (model/tp_comm.h) is the all-reduce. HostTpGroup is its in-process form for N simulated
// ranks (the CPU tests: a barrier, then every rank sums the N partials in rank order, so every
// rank gets the same bits); an NCCL communicator for GPUs is not written yet. Each rank has a cache
// store of its own, a mirror of the engine's (CacheStore::add_mirror), so the engine's slot and
// checkpoint copies reach every rank. Not supported yet, and refused: the MTP head, pre-quantized
// weights, head counts or intermediate sizes N does not divide, a host tier (external copies of a
// mirrored store are a CHECK failure). Expert parallelism (whole experts per rank) is not tried.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "model/decoder.h"
#include "model/prepare_model.h"
#include "model/tp_comm.h"

namespace syv {

// N ranks in one process, one thread each (see above).
class HostTpGroup {
 public:
  explicit HostTpGroup(int size);
  ~HostTpGroup();
  HostTpGroup(const HostTpGroup&) = delete;
  HostTpGroup& operator=(const HostTpGroup&) = delete;
  int size() const;
  TpComm& comm(int rank);

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
// rank each. The Model reports the full config, the rank's cache spec (every rank keeps its KV
// heads for every token of the engine's pool, its GDN heads' state for every slot), and rank 0's
// backend; forward() runs every rank (ranks 1.. on threads of their own) and returns rank 0's
// outputs. bind_cache() builds the other ranks' stores like the engine's and mirrors them; CUDA
// graphs are not supported yet.
Result<std::unique_ptr<Model>> load_tensor_parallel(const PreparedModel& prepared,
                                                    const std::vector<Backend*>& backends,
                                                    const LoadOptions& options);

}  // namespace syv
