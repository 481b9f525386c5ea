// The cache's bytes, owned by the engine: K/V pages of every full-attention layer, the recurrent
// state slots of every linear-attention (Gated DeltaNet) layer, and their checkpoint slots, all in
// one backend's memory, built from the model's CacheSpec (kv/cache_spec.h). The model reads and
// writes them through views (Model::bind_cache(), forward()); the engine (HybridState) resets,
// saves and loads state slots; a host tier or a tensor-parallel rank copies pages, slots and
// checkpoints out and back in with the asynchronous copies below.
//
// The store knows bytes and ids, nothing else: which page belongs to which sequence is the
// PagePool's and PrefixCache's business (kv/page_pool.h, kv/prefix_cache.h), which slot and
// checkpoint to use is CheckpointPool's (kv/checkpoint_pool.h). Compare mini-sglang's
// kvcache/base.py (a pool of buffers indexed by slot) and llama.cpp's llama-memory.h (the memory
// module owns the tensors; the graph only reads views).
//
// Layouts (page p, slot s, checkpoint c; "K" is the layer's KvLayerShape, "S" its StateLayerShape):
//   kv_view(l).k, .v    [num_pages, page_size, K.num_kv_heads, K.row_elems()] in K.dtype
//   kv_view(l).k_scales, .v_scales  [num_pages, page_size, K.num_kv_heads, K.scale_groups()] in
//                       kv_scale_dtype(K.dtype) (quantized KV only: backend/kv_cache_view.h)
//   state_view(l).conv  f32 [num_state_slots, S.conv_rows, S.conv_channels]
//   state_view(l).ssm   S.ssm_dtype [num_state_slots, S.heads, S.k_dim, S.v_dim]
//   checkpoints         the same per-layer shapes, [num_checkpoints, ...]
// The pool keeps every attention layer's K and V in one buffer (and their scales in another):
// one row per layer and K / V, each spanning every page, at one pitch where the layers' shapes are
// equal, so a page is a single strided copy (CopyOp) of 2 x layers rows, not one copy per row.
// An external page buffer (copy_page_out/in) holds page_bytes() (then each tensor-parallel
// mirror's part: external_page_bytes()): for each attention layer in order, the page's K rows then
// its V rows; then (quantized KV) for each layer its K scales then its V scales, so a page copied
// out and back in (host tier) or copied within the pool (copy_page) keeps the scales it was
// written with. An external slot or checkpoint buffer holds
// slot_bytes() (then the mirrors'): for each recurrent layer in order, its conv state then its
// delta-rule state. The same layout on every backend of the same activation dtype, so a page copied
// out of one store can be copied into another store of the same spec (another rank, a later
// process).
//
// Contract:
//  * Buffers are allocated once, in create(), and never move or grow until the store is
//    destroyed: a CUDA graph may capture the addresses of kv_view()/state_view() tensors. The
//    views are valid (and always safe to take) for the store's whole life.
//  * State slots and checkpoints start zeroed; KV pages start with whatever the allocator gave
//    (a page is only read where a sequence wrote it first).
//  * reset_slot, copy_page, copy_slot, save_checkpoint and load_checkpoint are enqueued on the
//    backend's compute stream, in order with forward(): call them between forwards, never while
//    a graph is being captured. They are always safe for ids in range (checked; out of range is a
//    CHECK failure) and for src == dst (a no-op).
//  * copy_*_out / copy_*_in run on the backend's copy streams (Backend::copy_async()): *_out on
//    the CopyDir::kOut stream, *_in on the CopyDir::kIn one, copy_pages_ahead on the kAhead one
//    (an out copy on a stream of its own), which run independently of each other (a copy out
//    never waits for a copy in that is in flight, nor the other way round). A
//    copy starts after everything enqueued on the compute stream before the call (and after the
//    earlier copies of its own stream) and runs concurrently with what comes after. Until the
//    returned event completes:
//      - out: the external buffer may not be read by the host (wait with
//        backend().wait_copy(event)), and the page/slot/checkpoint may not be written (no forward
//        that writes it, no reset/load into it);
//      - in: the page/slot/checkpoint may not be read or written by anything else; call
//        backend().order_after_copy(event) before the forward() that reads it (or wait_copy; the
//        host tier polls backend().copy_done(event) first, kv/inflight_loads.h);
//      - both: the external buffer must stay alive and unchanged.
//    On the CPU backend the copies are synchronous and the event is empty (already complete).
//  * Not thread-safe: owned and called by the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "kv/cache_spec.h"

namespace syv {

class CacheStore {
 public:
  // Validates `config` against `spec` (positive page size and pages when there is an attention
  // layer, state slots when there is a recurrent layer, checkpoints >= 0; every KV layer's dtype,
  // config.kv_dtype when set, must be one the backend has kernels for (Backend::supports_kv_dtype;
  // int4 also needs head_dim % 32 == 0): any other is refused by name) and allocates every buffer
  // on `backend`, which must outlive the store. With kv_dtype set, spec() is
  // spec.with_kv_dtype(kv_dtype).
  static Result<std::unique_ptr<CacheStore>> create(const CacheSpec& spec,
                                                    const CacheConfig& config, Backend& backend);
  ~CacheStore();
  CacheStore(const CacheStore&) = delete;
  CacheStore& operator=(const CacheStore&) = delete;

  const CacheSpec& spec() const { return spec_; }
  const CacheConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }

  // Bytes of one page over every attention layer (K and V): spec().kv_bytes_per_token *
  // page_size. Bytes of one state slot (= one checkpoint) over every recurrent layer.
  int64_t page_bytes() const { return spec_.kv_bytes_per_token * config_.page_size; }
  int64_t slot_bytes() const { return spec_.state_bytes_per_seq; }
  // Everything the store allocated.
  int64_t total_bytes() const { return total_bytes_; }

  // Views of model layer `layer` (an index into spec().layer_kinds; CHECKs its kind).
  using KvView = KvCacheView;  // layouts in backend/kv_cache_view.h (scales for quantized KV)
  struct StateView {
    Tensor conv;  // f32 [num_state_slots, conv_rows, conv_channels]
    Tensor ssm;   // ssm_dtype [num_state_slots, heads, k_dim, v_dim] (f32 unless state_dtype)
    // The layer's checkpoints, the targets of a forward's in-pass state saves
    // (Batch::state_save_*): [num_checkpoints, ...] of the same shapes; empty when there are none.
    Tensor conv_checkpoints, ssm_checkpoints;
  };
  KvView kv_view(int32_t layer) const;
  StateView state_view(int32_t layer) const;

  // ---- on the compute stream, in order with forward() ------------------------------------------
  void copy_page(int32_t src, int32_t dst);  // every attention layer's K and V (and scales)
  void reset_slot(int32_t slot);             // zeroes the slot's state in every layer
  void copy_slot(int32_t src, int32_t dst);  // state slot -> state slot
  void save_checkpoint(int32_t slot, int32_t checkpoint);
  void load_checkpoint(int32_t checkpoint, int32_t slot);

  // ---- on the copy streams, to and from an external buffer (see the contract above) ------------
  // `external` is external_page_bytes() / external_slot_bytes() bytes of host memory (pinned for
  // overlap), this backend's memory, or a peer device's memory. With mirrors (tensor
  // parallelism) it holds this store's part, then each mirror's in add_mirror() order; the
  // mirrors' copies are waited for before the call returns (the returned event is this store's),
  // so only this store's copy overlaps what follows.
  CopyEvent copy_page_out(int32_t page, void* external);
  CopyEvent copy_page_in(const void* external, int32_t page);
  // Several pages as one batch on the stream (one event for all; a host hit's load, an
  // admission's write-backs): pages[i].page to / from pages[i].external, as copy_page_out/in each.
  struct PageCopy {
    int32_t page = -1;
    void* external = nullptr;
  };
  CopyEvent copy_pages_out(std::span<const PageCopy> pages);
  CopyEvent copy_pages_in(std::span<const PageCopy> pages);
  // copy_pages_out() on the CopyDir::kAhead stream: copies nothing waits for soon (the host tier's
  // write-ahead), which the kOut copies a step waits for never queue behind.
  CopyEvent copy_pages_ahead(std::span<const PageCopy> pages);
  CopyEvent copy_slot_out(int32_t slot, void* external);
  CopyEvent copy_slot_in(const void* external, int32_t slot);
  CopyEvent copy_checkpoint_out(int32_t checkpoint, void* external);
  CopyEvent copy_checkpoint_in(const void* external, int32_t checkpoint);

  // Tensor parallelism (model/tensor_parallel.h): the other ranks' stores, of the same spec and
  // config on their own backends. reset_slot, copy_page, copy_slot, save_checkpoint and
  // load_checkpoint are applied to each mirror too, with the same ids, so the engine's cache
  // operations reach every rank's shard; so are the external copies, each rank's bytes in its own
  // part of the external buffer (a host tier holds every rank's). Not owned.
  void add_mirror(CacheStore& mirror);
  bool has_mirrors() const { return !mirrors_.empty(); }
  // An external page / slot buffer's bytes: page_bytes() / slot_bytes() plus the mirrors'.
  int64_t external_page_bytes() const;
  int64_t external_slot_bytes() const;

  // One start-up line: pages, slots, checkpoints and their bytes.
  std::string describe() const;

 private:
  CacheStore(const CacheSpec& spec, const CacheConfig& config, Backend& backend);
  // Per recurrent layer, the conv / ssm buffers of the live slots or of the checkpoints.
  struct StateBuffers {
    DeviceBuffer conv, ssm;
  };
  CopyEvent copy_state_external(const std::vector<StateBuffers>& bufs, int32_t index,
                                void* external, CopyDir dir);
  void copy_state(const std::vector<StateBuffers>& from, int32_t src,
                  const std::vector<StateBuffers>& to, int32_t dst);
  template <typename Copy>
  CopyEvent with_mirrors(CopyEvent own, const void* external, const Copy& copy);
  CopyEvent copy_pages(std::span<const PageCopy> pages, CopyDir dir);

  CacheSpec spec_;
  CacheConfig config_;
  Backend& backend_;
  std::vector<CacheStore*> mirrors_;  // add_mirror()
  std::vector<int32_t> index_;        // per model layer: index among its kind's layers
  // fn(part of page_a, the same part of page_b, bytes) for every part of a page, in the order of
  // an external page buffer (the layout above).
  template <typename Fn>
  void for_each_page_part(int32_t page_a, int32_t page_b, const Fn& fn) const;

  // Every attention layer's K and V values (values_) and their scales (scales_, quantized KV;
  // else empty), as rows: page_parts_ in the external order (K_0, V_0, K_1, ..., then the scales
  // likewise), page p's part of row i at page_parts_[i].base + p * page_parts_[i].bytes.
  DeviceBuffer values_, scales_;
  struct PagePart {
    char* base = nullptr;
    int64_t bytes = 0;   // per page
    int64_t offset = 0;  // of base in its buffer
  };
  std::vector<PagePart> page_parts_;
  // Runs of consecutive page_parts_ of equal bytes at one pitch (base of row i + 1 minus base of
  // row i): one strided CopyOp per page each (a single run for a model of uniform layers).
  struct PageRun {
    int32_t first = 0, rows = 0;
    int64_t pitch = 0;
  };
  std::vector<PageRun> page_runs_;
  std::vector<StateBuffers> slots_, ckpt_;  // per recurrent layer
  int64_t total_bytes_ = 0;
  std::vector<CopyOp> copy_ops_;  // the batch each copy_*_out / copy_*_in builds, reused
};

}  // namespace syv
