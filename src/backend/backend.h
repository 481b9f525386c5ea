// The op interface every model is written against. The CPU backend (backend/cpu) is the plain
// fp32 ground truth; CUDA (backend/cuda) implements the same ops and is tested against it.
//
// Conventions:
//  * Tensors are contiguous row-major views of this backend's memory (tensor.h).
//  * Activations use activation_dtype() (f32 on the CPU, bf16 on CUDA); weights may be f32, f16
//    or bf16; accumulation is always fp32. Norm weights and other small vectors may be any float.
//  * Ops are enqueued in order; on CUDA they run asynchronously on the backend's stream, so host
//    reads of results go through download() (which synchronizes).
//  * "T" is the number of packed tokens in the batch; "S" the number of sequences.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/available_memory.h"
#include "backend/batch.h"
#include "backend/device_facts.h"
#include "backend/host_pages.h"
#include "backend/kv_cache_view.h"
#include "backend/tensor.h"
#include "backend/weight.h"
#include "core/status.h"

namespace syv {

class Backend;

// Owns one allocation in a backend's memory; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* backend, void* data, size_t bytes)
      : backend_(backend), data_(data), bytes_(bytes) {}
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Tensor view(DType dtype, std::initializer_list<int64_t> dims) const {
    Tensor t(data_, dtype, dims);
    SYV_CHECK_LE(t.bytes(), bytes_) << "view larger than buffer";
    return t;
  }

 private:
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// One copy of copy_batch_async(): `rows` rows of `bytes` bytes each, row i from src + i *
// src_pitch to dst + i * dst_pitch (pitches >= bytes; unused when rows == 1). A cache store page
// of uniform layers is one such copy of 2 x layers rows (kv/cache_store.h), which CUDA hands to the
// copy engines as one strided copy instead of one per row.
struct CopyOp {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;  // per row
  size_t rows = 1;
  size_t dst_pitch = 0, src_pitch = 0;

  size_t total_bytes() const { return bytes * rows; }
  char* row_dst(size_t i) const { return static_cast<char*>(dst) + i * dst_pitch; }
  const char* row_src(size_t i) const { return static_cast<const char*>(src) + i * src_pitch; }
};

// Which of a backend's three copy streams a copy_async() runs on, named by its direction:
//   kIn    copies into this backend's memory (a host-tier load: host -> device);
//   kOut   copies out of it that a step waits for (a host-tier write-back at eviction: device ->
//          host);
//   kAhead copies out of it that nothing waits for soon (the host tier's write-ahead: device ->
//          host, ahead of an eviction).
// Each is its own in-order stream, and the three run independently of each other: a write-back
// never queues behind a load in flight (a 32K-token load is ~75 ms on an H200, and the step after
// a write-back waits for it) nor behind a write-ahead batch (hundreds of pages), nor a load behind
// either. What orders copies of
// different streams is the compute stream: each copy starts after everything enqueued on the
// compute stream before it, including the compute stream's waits on earlier copies
// (order_after_copy), so a copy enqueued after order_after_copy(e) starts after e's copy landed,
// whatever stream each is on (kv/host_tier.h "Copies" relies on that); and
// order_copies_after_copy(e, dir) orders one stream after a copy of another directly.
enum class CopyDir : uint8_t { kIn, kOut, kAhead };

// A point on one of a backend's copy streams (Backend::copy_async()): complete once every copy
// enqueued on that stream up to it has landed (copies on the other streams may land before or
// after it). Copyable (copies name the same point); an empty event is already complete. Backends
// keep their own handle behind it (a cudaEvent_t on CUDA).
class CopyEvent {
 public:
  CopyEvent() = default;
  explicit CopyEvent(std::shared_ptr<void> handle) : handle_(std::move(handle)) {}
  bool empty() const { return handle_ == nullptr; }
  void* handle() const { return handle_.get(); }

 private:
  std::shared_ptr<void> handle_;
};

// Host memory from Backend::allocate_pinned() or pin_host_pages() (a host tier's pages and
// checkpoints): page-locked where the backend can pin (CUDA: cudaHostAlloc / cudaHostRegister),
// so copy_async() to and from it overlaps with compute; plain host memory otherwise. Freed by the
// backend that allocated it when the buffer goes; that backend must outlive it. Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(void* data, size_t bytes, std::function<void(void*)> free)
      : data_(data, std::move(free)), bytes_(bytes) {}
  void* data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }

 private:
  std::unique_ptr<void, std::function<void(void*)>> data_{nullptr, [](void*) {}};
  size_t bytes_ = 0;
};

// Norm flavours: Qwen3 uses x̂·w; the hybrid families use the zero-centred x̂·(1 + w).
enum class NormKind : uint8_t { kPlain, kOnePlus };

struct RopeParams {
  double theta = 1e6;
  int32_t rotary_dim = 0;  // lanes [0, rotary_dim) rotate (rotate-half within them); rest pass
};

// Head layout of a Gated DeltaNet layer (hybrid ops below).
struct GdnShape {
  int32_t num_k_heads = 0;  // Hk
  int32_t num_v_heads = 0;  // Hv (a multiple of Hk)
  int32_t k_head_dim = 0;   // dk
  int32_t v_head_dim = 0;   // dv
  int32_t key_dim() const { return num_k_heads * k_head_dim; }
  int32_t value_dim() const { return num_v_heads * v_head_dim; }
  int32_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // q | k | v channels
};

// Batch metadata in backend memory, uploaded once per forward by prepare_batch().
struct BatchMeta {
  const Batch* host = nullptr;  // the host-side batch it was built from
  Tensor token_ids;             // i32 [T]
  Tensor positions;             // i32 [T]
  Tensor seq_starts;            // i32 [S + 1]
  Tensor context_lens;          // i32 [S]
  Tensor page_table;            // i32 [S, max_pages_per_seq]
  Tensor slot_mapping;          // i32 [T]: page_id * page_size + offset where each new K/V goes
  Tensor token_seq;             // i32 [T]: sequence index of each token
  Tensor logit_rows;            // i32 [R]
  Tensor state_slots;           // i32 [S] (hybrids)
  // i32 [S + 1 + 2N]: Batch::state_save_starts, _after, _dests back to back (StateSaves reads
  // them); numel 0 when the batch saves nothing.
  Tensor state_saves;
  int32_t num_state_saves = 0;  // N
  int32_t page_size = 0;
  int32_t max_seq_len = 0;      // max new tokens of one sequence in this batch
  int32_t max_context_len = 0;  // max context_lens
};

// meta.state_saves unpacked: pointers into that tensor's memory (host or device, as the backend's
// meta), count 0 when the batch saves nothing. Save i of sequence s (begin(s) <= i < end(s)) writes
// the state after after[i] new tokens into checkpoint dests[i].
struct StateSaves {
  int32_t count = 0;
  const int32_t* starts = nullptr;  // [S + 1]
  const int32_t* after = nullptr;   // [N]
  const int32_t* dests = nullptr;   // [N]
  int32_t begin(int64_t s) const { return count > 0 ? starts[s] : 0; }
  int32_t end(int64_t s) const { return count > 0 ? starts[s + 1] : 0; }
  // CHECKs (on meta.host, the host batch) that every dest is a checkpoint of `save_to` (dim 0) and
  // that save_to is given when there are saves.
  static StateSaves of(const BatchMeta& meta, const Tensor& save_to);
};

// One logits row's sampling parameters for Backend::sample() (the engine's SamplingParams,
// flattened, plus the row's uniform draw in [0, 1) from the sequence's own generator).
struct SampleRow {
  float temperature = 0.0f;  // 0 = greedy (argmax of the penalised logits, lowest id on ties)
  int32_t top_k = 0;         // <= 0 or >= V: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  double uniform = 0.0;
  int32_t penalty_begin = 0, penalty_end = 0;  // this row's entries in the penalty list
};

// A token the penalties apply to: logit = repeated ? (logit > 0 ? logit / r : logit * r) : logit,
// then logit -= presence + frequency * output_count when output_count > 0.
struct SamplePenalty {
  int32_t token = 0;
  int32_t output_count = 0;  // times generated so far
  int32_t repeated = 0;      // 1: in the prompt or the output, and repetition_penalty != 1
};

// One MoE layer's weights for Backend::moe_block() (model/blocks.h MlpWeights): E routed experts
// of width I, top_k of them per token, plus a shared expert of width Is gated per token.
struct MoeBlockWeights {
  const Weight* router = nullptr;           // [E, H]
  const Weight* experts_gate_up = nullptr;  // [E, 2I, H] (gate rows, then up rows)
  const Weight* experts_down = nullptr;     // [E, H, I]
  const Weight* shared_gate_up = nullptr;   // [2Is, H]
  const Weight* shared_down = nullptr;      // [H, Is]
  const Weight* shared_gate = nullptr;      // [1, H]
};

// The tensors of Backend::moe_block()'s op sequence, the caller's memory. logits, ids and weights
// are outputs (the router's); the shared_* and gate tensors are scratch whose contents afterwards
// are unspecified (a fused implementation may leave them untouched).
struct MoeBlockBuffers {
  Tensor logits;          // f32 [T, E]
  Tensor ids;             // i32 [T, top_k]
  Tensor weights;         // f32 [T, top_k]
  Tensor shared_gate_up;  // [T, 2Is], activation dtype
  Tensor shared_act;      // [T, Is]
  Tensor shared;          // [T, H]
  Tensor gate;            // [T, 1]
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual DType activation_dtype() const = 0;
  // The dtype this backend wants a weight stored in when the checkpoint holds it as `file_dtype`.
  // Models convert on the host before upload. The CPU backend widens everything to f32 (so linear()
  // is one sgemm); the default keeps the file's dtype.
  virtual DType weight_dtype(DType file_dtype) const { return file_dtype; }
  // Makes this backend's device the calling thread's current one (CUDA: cudaSetDevice; the
  // default does nothing). A thread that runs ops on a backend of a device other than its current
  // one calls it first (the tensor-parallel ranks' threads: model/tensor_parallel.h): kernels are
  // launched on the current device. Memory calls (allocate, release, copies, fill_zero) need it
  // not: they switch to the backend's device and back themselves.
  virtual void make_current() {}

  // ---- memory -------------------------------------------------------------------------------
  // What allocate() can still get, for start-up checks (backend/available_memory.h): this
  // machine's MemAvailable by default (right for backends that allocate host memory); CUDA: the
  // device's free bytes.
  virtual AvailableMemory available_memory();
  // The device's kind, name and total memory (backend/device_facts.h): this machine, under
  // name(), by default (right for backends that compute on the host); CUDA: its GPU.
  virtual DeviceFacts device_facts();
  virtual DeviceBuffer allocate(size_t bytes) = 0;
  // `bytes` of host memory that ops read in place, at the buffer's address (a weight read a few
  // rows a step and kept off the device: the input embedding table with --host-embeddings). Not
  // counted as device memory. The default is allocate() (right for backends whose memory is host
  // memory); CUDA: pinned host memory mapped into the device's address space (kernels read it
  // over the bus). Released by ~DeviceBuffer like any other buffer.
  virtual DeviceBuffer allocate_host_resident(size_t bytes) { return allocate(bytes); }
  // Whether allocate_host_resident() memory lies outside what allocate() draws from, i.e. frees
  // device memory (CUDA: host vs device memory; the default: both are the same host memory).
  virtual bool host_resident_frees_device_memory() const { return false; }
  virtual void release(void* data) = 0;  // called by ~DeviceBuffer
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;  // synchronizes
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;           // device to device
  virtual void fill_zero(void* dst, size_t bytes) = 0;
  virtual void synchronize() = 0;

  // ---- asynchronous copies (kv/cache_store.h: host tier, tensor-parallel ranks) ---------------
  // Enqueues a copy of `bytes` from src to dst on the backend's copy stream of direction `dir`
  // (CopyDir), a stream beside the one ops run on: the copy starts after every op enqueued before
  // this call has finished (it sees what they wrote, and after every copy the compute stream was
  // ordered after by then) and after every copy enqueued before it on the same stream; it runs
  // concurrently with ops enqueued after it and with copies on the other streams, which it is not
  // ordered against otherwise (two copies of different streams touching the same bytes must be
  // ordered through the compute stream: order_after_copy() of the first before enqueuing the
  // second). Either side may be this backend's memory, host memory (pinned for the copy to
  // overlap) or a peer device's memory. Returns the event that completes when this copy (and
  // every earlier one on its stream) has landed. Neither buffer may be touched by later ops or the
  // host until then: see wait_copy() and order_after_copy(). The default copies synchronously
  // (std::memcpy after synchronize(), right for backends whose memory is host memory; `dir` does
  // not matter there) and returns an empty event.
  virtual CopyEvent copy_async(void* dst, const void* src, size_t bytes, CopyDir dir);
  // copy_async() of every op's rows (no two writing the same bytes, none writing what another
  // reads) as one batch on the stream of `dir`: one ordering after the compute stream, one event
  // for all (a page of a 36-layer model is one op of 72 rows; CUDA moves each op as one strided
  // copy on the copy engines by default, CudaBackend::BatchCopyPath). The default runs
  // copy_async() per row.
  virtual CopyEvent copy_batch_async(const std::vector<CopyOp>& ops, CopyDir dir);
  // `bytes` of host memory for copy_async() (a host tier): pinned where the backend can, see
  // PinnedBuffer. The default is plain 64-byte-aligned host memory (right for the CPU backend,
  // whose "device" memory is host memory too). Fails with a message naming the size when the
  // memory cannot be had.
  virtual Result<PinnedBuffer> allocate_pinned(size_t bytes);
  // Page-locks host memory already faulted in (backend/host_pages.h, e.g. on a background thread)
  // and takes it over: the buffer unpins and frees it when it goes. Call it from the thread that
  // runs ops, between steps (a host tier's pieces; kv/host_tier.h "Memory"). CUDA:
  // cudaHostRegister (portable and mapped, so a kernel can read it too). The default only takes
  // the memory over (right for the CPU backend, where nothing needs pinning). Fails with a message
  // naming the size when the memory cannot be pinned (the pages are then freed).
  virtual Result<PinnedBuffer> pin_host_pages(HostPages pages);
  // Whether pin_host_pages() page-locks (so memory for it is worth faulting in beforehand).
  virtual bool pins_host_memory() const { return false; }
  // Blocks the host until `event` is complete (empty: returns at once).
  virtual void wait_copy(const CopyEvent& event) { (void)event; }
  // Whether `event` is complete, without waiting (empty: true). A host-tier load is polled with it
  // once per step while its sequence waits (kv/inflight_loads.h). The default answers true
  // (copies are synchronous there).
  virtual bool copy_done(const CopyEvent& event) {
    (void)event;
    return true;
  }
  // Ops enqueued after this call start only once `event` is complete; the host does not wait
  // (a copy into a page the next forward() reads). The default does nothing (copies are
  // synchronous there).
  virtual void order_after_copy(const CopyEvent& event) { (void)event; }
  // Copies of stream `dir` enqueued after this call start only once `event` (a copy of another
  // stream) is complete; neither the host nor the compute stream waits (a load into device pages
  // that write-backs in flight still read, a write-back into a host entry a write-ahead in flight
  // fills: kv/host_tier.h "Copies"). The default does nothing
  // (copies are synchronous there).
  virtual void order_copies_after_copy(const CopyEvent& event, CopyDir dir) {
    (void)event;
    (void)dir;
  }
  // Deferred issue: from defer_copies() until flush_copies(), a backend that takes it (CUDA, unless
  // SYV_DEFER_COPIES=0) records copy_async(), copy_batch_async() and order_copies_after_copy()
  // instead of issuing them, and flush_copies() issues them in call order. Nothing else changes:
  // each copy still starts after what the compute stream was given before its call (an event is
  // recorded there at the call), and the events returned are those of the copies. A call that
  // waits for or asks about a recorded copy's event (wait_copy, copy_done, order_after_copy), and
  // the release of memory a recorded copy touches, issues every recorded call first. The engine
  // defers its step's copies until the step's forward is launched (EngineCore::step), so the host
  // time spent issuing a host hit's page copies (hundreds of calls) overlaps the GPU's forward
  // instead of delaying its launch. The default (synchronous copies) has nothing to defer.
  virtual void defer_copies() {}
  virtual void flush_copies() {}
  // Whether enqueued ops return before they run (a device's stream): host work done after
  // enqueuing a forward overlaps it (EngineOptions::emit_after_launch). The default runs them
  // where they are called.
  virtual bool asynchronous() const { return false; }
  // Fills n elements of a float buffer (F32, BF16, F16) with the uniform values of
  // backend/random_fill.h: element i = random_uniform(seed, i, scale) rounded to dtype, in
  // [-scale, scale). The same values on every backend, machine and thread count (random weights,
  // benchmarks). The default draws on the host (backend/random_fill.cpp) and uploads; CUDA draws
  // on the device.
  virtual void fill_random(void* data, DType dtype, int64_t n, uint64_t seed, float scale);

  // Uploads the batch's metadata into backend memory (valid until the next prepare_batch()).
  virtual BatchMeta prepare_batch(const Batch& batch, int32_t page_size) = 0;

  // ---- ops ----------------------------------------------------------------------------------
  // out[t, :] = table[ids[t], :].  table [V, H], ids i32 [T], out [T, H].
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;

  // out = rmsnorm(x) * w (kPlain) or * (1 + w) (kOnePlus), over the last dim. x/out [.., H].
  virtual void rmsnorm(const Tensor& x, const Tensor& w, float eps, NormKind kind, Tensor& out) = 0;

  // residual += x; out = rmsnorm(residual). residual, x, out [T, H].
  virtual void add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                           NormKind kind, Tensor& out) = 0;

  // out = x · wᵀ (+ bias). x [T, K], w [N, K], bias [N] or empty, out [T, N].
  // out may be f32 even when activations are bf16 (the model asks for f32 logits this way).
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) = 0;

  // out = silu(gate_up[:, :I]) * gate_up[:, I:]. gate_up [T, 2I], out [T, I].
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;

  // out = a + b (same shapes).
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;

  // In place on q [T, Hq, D] and k [T, Hk, D]: per-head rmsnorm with q_norm/k_norm [D] (skipped
  // when empty), then RoPE (rotate-half) at meta.positions over the first rope.rotary_dim lanes.
  virtual void qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_norm, const Tensor& k_norm,
                            float eps, NormKind kind, const RopeParams& rope,
                            const BatchMeta& meta) = 0;

  // Writes k, v [T, Hk, D] into the paged caches k_cache, v_cache [num_pages, page_size, Hk, D] at
  // meta.slot_mapping.
  virtual void kv_write(const Tensor& k, const Tensor& v, Tensor& k_cache, Tensor& v_cache,
                        const BatchMeta& meta) = 0;

  // Causal attention of the new tokens q [T, Hq, D] over each sequence's cached context (pages in
  // meta.page_table, the new tokens already written), GQA (Hq % Hk == 0). out [T, Hq, D].
  virtual void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               float scale, const BatchMeta& meta, Tensor& out) = 0;

  // out[r, :] = x[meta.logit_rows[r], :]. x [T, H], out [R, H].
  virtual void gather_rows(const Tensor& x, const BatchMeta& meta, Tensor& out) = 0;

  // ---- fused ops ------------------------------------------------------------------------------
  // Each is exactly a sequence of the ops above, and its default (backend/fused_ops_default.cpp)
  // runs that sequence; a backend overrides the ones it can do in fewer passes. Every output is
  // written as the sequence writes it.

  // The attention prologue on one fused q|k|v projection: qkv [T, (Hq + 2 Hk) * D] holds each
  // token's Hq query heads, then its Hk key heads, then its Hk value heads (x · [Wq; Wk; Wv]ᵀ).
  // Splits it into q [T, Hq, D], k and v [T, Hk, D], then qk_norm_rope(q, k, ...) and
  // kv_write(k, v, k_cache, v_cache, meta).
  virtual void qkv_norm_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                   float eps, NormKind kind, const RopeParams& rope,
                                   const BatchMeta& meta, Tensor& q, Tensor& k, Tensor& v,
                                   Tensor& k_cache, Tensor& v_cache);

  // residual_out = residual + x, normed = rmsnorm(residual_out) (add_rmsnorm; residual_out may be
  // residual itself), then out = linear(normed, w, bias).
  virtual void add_rmsnorm_linear(const Tensor& residual, const Tensor& x, const Tensor& norm_w,
                                  float eps, NormKind kind, Tensor& residual_out, Tensor& normed,
                                  const Tensor& w, const Tensor& bias, Tensor& out);

  // gate_up = linear(x, w) with w [2I, H] (gate rows, then up rows); out = silu_mul(gate_up).
  virtual void linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& gate_up, Tensor& out);

  // out1 = linear(x, w1), out2 = linear(x, w2) (no biases): two projections of one input, the
  // second typically a few rows (the GDN b|a beside z). The default runs linear() twice; CUDA runs
  // both GEMVs in one launch at few tokens.
  virtual void linear_pair(const Tensor& x, const Tensor& w1, Tensor& out1, const Tensor& w2,
                           Tensor& out2);

  // add_rmsnorm_linear(residual, x, norm_w, ..., normed, w, no bias, gate_up), then
  // out = silu_mul(gate_up): a SwiGLU MLP's input half in one op.
  virtual void add_rmsnorm_linear_silu_mul(const Tensor& residual, const Tensor& x,
                                           const Tensor& norm_w, float eps, NormKind kind,
                                           Tensor& residual_out, Tensor& normed, const Tensor& w,
                                           Tensor& gate_up, Tensor& out);

  // ---- hybrid ops (Qwen3.5 / Qwen3-Next: Gated DeltaNet, gated attention, MoE) ---------------
  // Not pure: the defaults (backend/hybrid_ops_default.cpp) abort with "op <name> is not
  // implemented on backend <name()>". The CPU backend implements all of them
  // (backend/cpu/cpu_hybrid_ops.h), and so does CUDA (backend/cuda/gated_delta.cu, moe.cu, ...).
  //
  // Recurrent state lives in per-layer buffers indexed by slot: sequence s of the batch uses slot
  // meta.state_slots[s], whose content corresponds to exactly positions [0, first new position)
  // of that sequence (all zeros for an empty prefix). The ops advance it over the new tokens.

  // True when the Gated DeltaNet and gated attention ops below (causal_conv1d_silu,
  // gated_delta_rule, gated_rmsnorm, sigmoid_mul) are implemented; supports_moe_ops() likewise for
  // moe_topk and moe_experts. load_model() refuses a model needing either on a backend without
  // them, so an unsupported combination is a clear error at load, never an abort mid-request.
  virtual bool supports_hybrid_ops() const { return false; }
  virtual bool supports_moe_ops() const { return false; }
  // Empty when moe_topk / moe_experts run a model of these shapes (E experts, top_k per token,
  // hidden size H, expert intermediate size I), else why not (load_model() refuses with it).
  virtual std::string moe_shape_unsupported(int64_t experts, int64_t top_k, int64_t hidden,
                                            int64_t inter) const {
    (void)experts, (void)top_k, (void)hidden, (void)inter;
    return {};
  }
  // True when linear_quantized() computes every quantized format of backend/weight.h (the CPU
  // backend's reference). prepare_model() refuses a checkpoint with quantized modules on a
  // backend without it, before anything is loaded.
  virtual bool supports_quantized_weights() const { return false; }
  // Called by the weight loader for every quantized weight it keeps (at load, before any step):
  // a backend whose quantized path needs scratch that follows the weight's shape sizes it here,
  // so the scratch exists when the memory plan is made and never grows during a step (CUDA: the
  // bf16 buffer its prefill path dequantizes into, a linear's or the output projection's share of
  // it capped where that path takes the weight in row chunks: backend/cuda_choices.h). `role`:
  // what the weight is to the model (backend/weight.h). The default does nothing.
  virtual void reserve_quantized_scratch(const Weight& w, QuantWeightRole role) {
    (void)w, (void)role;
  }
  // Whether the loader keeps a MoE layer's experts quantized when the checkpoint stores them so
  // (moe_experts() on quantized Weights: moe_experts_quantized()), instead of dequantizing them at
  // load. An 80B-class MoE model in fp8 fits one GPU only this way.
  virtual bool keeps_moe_experts_quantized() const { return false; }
  // Whether that choice is the backend's to make per model (CUDA: unless SYV_QUANT_MOE forces it),
  // and making it (before a load; prepare_model() decides from the memory the weights take).
  virtual bool chooses_moe_experts_quantized() const { return false; }
  virtual void set_moe_experts_quantized(bool keep) { (void)keep; }
  // Whether the loader re-lays act-order int4 weights (a g_idx) with their groups contiguous and
  // a column permutation (backend/weight.h `perm`; model/quant_weights.h permute_act_order), which
  // the backend's quantized ops then take (reading x gathered by perm), instead of the g_idx.
  virtual bool takes_permuted_act_order() const { return false; }
  // What the activations of a quantized weight's GEMM (more tokens than a GEMV's) are multiplied
  // in (`--quantized-activations`; docs/cuda-backend.md "fp8 tensor-core GEMMs"):
  //   kAuto  fp8 block-scaled weights multiply fp8 activations (W8A8: each token's 128-column
  //          groups scaled to e4m3, as vLLM and SGLang run these checkpoints) where the backend
  //          has that GEMM; int4 weights multiply the activations as they are (W4A16).
  //   kOff   every quantized weight multiplies the activations as they are (its values
  //          dequantized: exact to the weights; the reference).
  //   kFp8   as kAuto, and int4 weights of 128-column groups multiply fp8 activations too (W4A8:
  //          the weight's (q - z) values are exact in e4m3, its group scale is the GEMM's).
  // A backend without fp8 GEMMs runs kAuto as kOff and refuses kFp8 (an error naming the reason).
  // Batch-invariant mode always multiplies as kOff does. Applies to calls made after it.
  enum class QuantizedActivations : uint8_t { kAuto, kOff, kFp8 };
  virtual Status set_quantized_activations(QuantizedActivations mode) {
    if (mode == QuantizedActivations::kFp8)
      return Status::Error("fp8 activations (W4A8) are not implemented on backend " + name());
    return Status::Ok();
  }
  // Whether gated_delta_rule() takes a state of dtype `t` (CacheConfig::state_dtype). f32 always.
  virtual bool supports_state_dtype(DType t) const { return t == DType::F32; }
  // Whether a KV cache of dtype `t` (CacheConfig::kv_dtype) has kernels here: kv_write /
  // paged_attention / qkv_norm_rope_write on it (float KV: the Tensor ops; fp8 e4m3 and int4 u4x2:
  // the *_quantized hooks). The default: the activation dtype only.
  virtual bool supports_kv_dtype(DType t) const { return t == activation_dtype(); }
  // Whether those kernels take a head_dim of `head_dim` for a KV cache of dtype `t` (given
  // supports_kv_dtype(t)). The default: any.
  virtual bool supports_kv_head_dim(DType t, int64_t head_dim) const {
    (void)t;
    (void)head_dim;
    return true;
  }

  // Depthwise causal conv1d over each sequence's new tokens, then SiLU (no bias).
  // x [T, C]; weight [C, K]; conv_state f32 [num_slots, K - 1, C]: the K - 1 inputs preceding the
  // new tokens, oldest first (updated to the last K - 1 inputs). out [T, C] (may not alias x).
  // State saves (meta.state_saves, Batch::state_save_*): save_to f32 [num_checkpoints, K - 1, C]
  // receives, for each save, the window as it stands after its `after` new tokens; save_to may be
  // empty when the batch saves nothing.
  virtual void causal_conv1d_silu(const Tensor& x, const Tensor& weight, Tensor& conv_state,
                                  Tensor& save_to, const BatchMeta& meta, Tensor& out);

  // The gated delta rule, token by token per sequence (fp32 state):
  //   q, k, v = split(qkv[t]) as [Hk*dk | Hk*dk | Hv*dv]; q, k L2-normalised per head
  //   (x * rsqrt(sum x^2 + 1e-6)), q *= 1/sqrt(dk); value head j reads key head j / (Hv / Hk);
  //   b, a = split(ba[t]) as [Hv | Hv]; beta = sigmoid(b); g = -exp(a_log) * softplus(a + dt_bias);
  //   S = exp(g) S;  S += k (beta (v - S^T k))^T;  o = S^T q.
  // qkv [T, 2*Hk*dk + Hv*dv] (the conv output); ba f32 [T, 2*Hv] (models keep the gate inputs in
  // f32: the decay compounds over every later token); a_log, dt_bias [Hv];
  // state [num_slots, Hv, dk, dv] (f32, or a dtype supports_state_dtype() accepts; accumulation is
  // f32 either way, the state rounded when written back); out [T, Hv*dv]. State saves: save_to
  // [num_checkpoints, Hv, dk, dv] (state's dtype) receives, for each save of meta.state_saves, the
  // state after its `after` new tokens (empty when the batch saves nothing).
  virtual void gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log,
                                const Tensor& dt_bias, const GdnShape& shape, Tensor& state,
                                Tensor& save_to, const BatchMeta& meta, Tensor& out);

  // The GDN output norm: out = x * rsqrt(mean(x^2) + eps) * w * silu(z), over groups of
  // D = w.numel() (plain weight, NOT 1 + w). x, z, out [N, D] (any leading shape with numel % D ==
  // 0).
  virtual void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                             Tensor& out);
  // out [T, N] = linear(gated_rmsnorm(x, z, norm_w, eps), w) with w [N, K] and x, z holding T * K
  // elements (the GDN output norm and out_proj). `normed` (like x) is scratch: the default writes
  // the norm's output there; CUDA at few tokens computes it inside the GEMV and leaves it alone.
  virtual void gated_rmsnorm_linear(const Tensor& x, const Tensor& z, const Tensor& norm_w,
                                    float eps, const Tensor& w, Tensor& normed, Tensor& out);

  // out = x * sigmoid(gate). x, out [T, N]; gate [T, N], or [T, 1] broadcast over the row.
  virtual void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out);

  // MoE router: p = softmax(logits[t]) over E experts; the top_k largest (ties: lower index
  // first), in descending order; their weights p divided by their sum when `renormalize`.
  // logits [T, E]; ids i32 [T, top_k]; weights f32 [T, top_k].
  virtual void moe_topk(const Tensor& logits, int32_t top_k, bool renormalize, Tensor& ids,
                        Tensor& weights);

  // Routed experts (SwiGLU): out[t] = sum_j weights[t, j] * down[e] · (silu(gu[:I]) * gu[I:]),
  // gu = gate_up[e] · x[t], e = ids[t, j]. x [T, H]; gate_up [E, 2I, H] (gate rows then up rows);
  // down [E, H, I]; ids i32 / weights f32 [T, top_k]; out [T, H] (overwritten).
  virtual void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                           const Tensor& gate_up, const Tensor& down, Tensor& out);

  // A MoE layer after its pre-norm, as one op: routed experts plus a sigmoid-gated shared expert.
  // The default (backend/fused_ops_default.cpp) runs this sequence, on typed weights:
  //   linear(x, router) -> b.logits;  moe_topk(b.logits, top_k, renormalize, b.ids, b.weights);
  //   moe_experts(x, b.ids, b.weights, experts_gate_up, experts_down, out);
  //   linear_silu_mul(x, shared_gate_up, b.shared_gate_up, b.shared_act);
  //   linear(b.shared_act, shared_down) -> b.shared;  linear(x, shared_gate) -> b.gate;
  //   sigmoid_mul(b.shared, b.gate, b.shared);  add(out, b.shared, out).
  // x [T, H]; out [T, H] (overwritten; may not alias x); `b` as MoeBlockBuffers says, sized for T.
  // An override computes the same sums in fewer launches, possibly in another rounding: its
  // logits may differ from linear()'s in the last bits (ids then differ only where two experts'
  // probabilities do by less than that), its out by bf16 rounding (CUDA: up to
  // cuda::kMoeGemvMaxTokens tokens outside batch-invariant mode, moe.cuh launch_moe_block()).
  virtual void moe_block(const Tensor& x, const MoeBlockWeights& w, int32_t top_k, bool renormalize,
                         MoeBlockBuffers& b, Tensor& out);

  // ---- typed weights and KV (backend/weight.h, backend/kv_cache_view.h) -------------------------
  // What models call. Each overload dispatches on the weight's format / the cache's dtype with
  // one branch and no other work: a dense weight (a float KV cache) runs the Tensor op above
  // unchanged; a quantized weight runs the op's sequence of plain ops (fused_ops_default.cpp)
  // with its projection through linear_quantized(), the one hook a backend must have for a format
  // (add_rmsnorm_quantized and linear_quantized_silu_mul default to the plain sequence around
  // it; CUDA overrides them to fuse): the CPU backend computes it (the reference), CUDA too; a
  // backend without it refuses by name: "backend X linear:
  // fp8 block-scaled weights (f8e4m3, 128x128 blocks) are not supported yet" (a CHECK failure). The
  // MoE experts are quantized only where keeps_moe_experts_quantized() (else the loader keeps them
  // dense).
  void linear(const Tensor& x, const Weight& w, const Tensor& bias, Tensor& out) {
    if (w.format == WeightFormat::kDense) {
      linear(x, w.tensor, bias, out);
    } else {
      linear_quantized(x, w, bias, out);
    }
  }
  void gated_rmsnorm_linear(const Tensor& x, const Tensor& z, const Tensor& norm_w, float eps,
                            const Weight& w, Tensor& normed, Tensor& out) {
    if (w.format == WeightFormat::kDense) {
      gated_rmsnorm_linear(x, z, norm_w, eps, w.tensor, normed, out);
    } else {
      gated_rmsnorm(x, z, norm_w, eps, normed);
      linear_quantized(normed, w, Tensor(), out);
    }
  }
  void linear_pair(const Tensor& x, const Weight& w1, Tensor& out1, const Weight& w2,
                   Tensor& out2) {
    if (w1.format == WeightFormat::kDense && w2.format == WeightFormat::kDense) {
      linear_pair(x, w1.tensor, out1, w2.tensor, out2);
    } else {
      linear(x, w1, Tensor(), out1);
      linear(x, w2, Tensor(), out2);
    }
  }
  void add_rmsnorm_linear(const Tensor& residual, const Tensor& x, const Tensor& norm_w, float eps,
                          NormKind kind, Tensor& residual_out, Tensor& normed, const Weight& w,
                          const Tensor& bias, Tensor& out) {
    if (w.format != WeightFormat::kDense) {
      add_rmsnorm_quantized(residual, x, norm_w, eps, kind, residual_out, normed, w, bias, out,
                            nullptr);
      return;
    }
    add_rmsnorm_linear(residual, x, norm_w, eps, kind, residual_out, normed, w.tensor, bias, out);
  }
  void linear_silu_mul(const Tensor& x, const Weight& w, Tensor& gate_up, Tensor& out) {
    if (w.format != WeightFormat::kDense) {
      linear_quantized_silu_mul(x, w, gate_up, out);
      return;
    }
    linear_silu_mul(x, w.tensor, gate_up, out);
  }
  void add_rmsnorm_linear_silu_mul(const Tensor& residual, const Tensor& x, const Tensor& norm_w,
                                   float eps, NormKind kind, Tensor& residual_out, Tensor& normed,
                                   const Weight& w, Tensor& gate_up, Tensor& out) {
    if (w.format != WeightFormat::kDense) {
      add_rmsnorm_quantized(residual, x, norm_w, eps, kind, residual_out, normed, w, Tensor(),
                            gate_up, &out);
      return;
    }
    add_rmsnorm_linear_silu_mul(residual, x, norm_w, eps, kind, residual_out, normed, w.tensor,
                                gate_up, out);
  }
  // Dense experts: gate_up [E, 2I, H], down [E, H, I] (the Tensor op above). Quantized experts
  // (where keeps_moe_experts_quantized()): both quantized, stacked along their rows: gate_up
  // [E * 2I, H] (expert e's gate rows, then its up rows, at rows [e * 2I, (e + 1) * 2I)), down
  // [E * H, I] (expert e's at rows [e * H, (e + 1) * H)); moe_experts_quantized() computes them.
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Weight& gate_up,
                   const Weight& down, Tensor& out) {
    if (gate_up.format == WeightFormat::kDense && down.format == WeightFormat::kDense) {
      moe_experts(x, ids, weights, gate_up.tensor, down.tensor, out);
    } else {
      moe_experts_quantized(x, ids, weights, gate_up, down, out);
    }
  }
  // The attention ops on a KvCacheView: float KV (f32, f16, bf16; no scales) runs the Tensor ops
  // above on cache.k / cache.v; a quantized KV dtype (fp8, int4: backend/kv_cache_view.h) runs the
  // *_quantized hooks below, which a backend overrides for the dtypes it has kernels for (the
  // defaults refuse by name: "backend cpu kv_write: KV cache dtype f8e4m3 with scales is not
  // supported yet").
  void kv_write(const Tensor& k, const Tensor& v, const KvCacheView& cache, const BatchMeta& meta) {
    if (!plain_kv(cache)) return kv_write_quantized(k, v, cache, meta);
    Tensor kc = cache.k, vc = cache.v;
    kv_write(k, v, kc, vc, meta);
  }
  void paged_attention(const Tensor& q, const KvCacheView& cache, float scale,
                       const BatchMeta& meta, Tensor& out) {
    if (!plain_kv(cache)) return paged_attention_quantized(q, cache, scale, meta, out);
    paged_attention(q, cache.k, cache.v, scale, meta, out);
  }
  void qkv_norm_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                           NormKind kind, const RopeParams& rope, const BatchMeta& meta, Tensor& q,
                           Tensor& k, Tensor& v, const KvCacheView& cache) {
    if (!plain_kv(cache)) {
      return qkv_norm_rope_write_quantized(qkv, q_norm, k_norm, eps, kind, rope, meta, q, k, v,
                                           cache);
    }
    Tensor kc = cache.k, vc = cache.v;
    qkv_norm_rope_write(qkv, q_norm, k_norm, eps, kind, rope, meta, q, k, v, kc, vc);
  }

 protected:
  // out = x · dequant(w)ᵀ (+ bias) for a weight whose format is not kDense. The default refuses
  // (refuse_weight("linear", w)); a backend with kernels for a format overrides this.
  virtual void linear_quantized(const Tensor& x, const Weight& w, const Tensor& bias, Tensor& out);
  // moe_experts() with quantized experts (the stacked layout above): the same sum as the dense
  // op over the dequantized weights. The default refuses by name (refuse_weight).
  virtual void moe_experts_quantized(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                     const Weight& gate_up, const Weight& down, Tensor& out);
  // add_rmsnorm_linear's sequence with a quantized w: residual_out = residual + x, normed =
  // rmsnorm(residual_out), out = linear_quantized(normed, w, bias), then, when act is given,
  // *act = silu_mul(out) (add_rmsnorm_linear_silu_mul's sequence: out is gate_up). The default
  // copies residual to residual_out (when they differ) and runs add_rmsnorm(); CUDA reads one and
  // writes the other in its norm kernel (no copy) and fuses the SiLU into its GEMV.
  virtual void add_rmsnorm_quantized(const Tensor& residual, const Tensor& x, const Tensor& norm_w,
                                     float eps, NormKind kind, Tensor& residual_out, Tensor& normed,
                                     const Weight& w, const Tensor& bias, Tensor& out, Tensor* act);
  // linear_silu_mul's sequence with a quantized w: gate_up = linear_quantized(x, w), out =
  // silu_mul(gate_up). CUDA fuses the product into its GEMV at few tokens.
  virtual void linear_quantized_silu_mul(const Tensor& x, const Weight& w, Tensor& gate_up,
                                         Tensor& out);
  // kv_write / paged_attention on a quantized KV cache (cache.dtype F8E4M3 or U4X2 with scales,
  // layouts in backend/kv_cache_view.h): kv_write quantizes each (token, kv head) row exactly as
  // backend/kv_quant.h does and writes its scales; paged_attention reads the stored values times
  // their scales (no dequantized copy of the cache). The defaults refuse (refuse_kv).
  virtual void kv_write_quantized(const Tensor& k, const Tensor& v, const KvCacheView& cache,
                                  const BatchMeta& meta);
  virtual void paged_attention_quantized(const Tensor& q, const KvCacheView& cache, float scale,
                                         const BatchMeta& meta, Tensor& out);
  // qkv_norm_rope_write's sequence on a quantized cache. The default splits and norms/ropes as
  // the float version does (qk_norm_rope on the q, k, v outputs), then kv_write_quantized.
  virtual void qkv_norm_rope_write_quantized(const Tensor& qkv, const Tensor& q_norm,
                                             const Tensor& k_norm, float eps, NormKind kind,
                                             const RopeParams& rope, const BatchMeta& meta,
                                             Tensor& q, Tensor& k, Tensor& v,
                                             const KvCacheView& cache);
  // "backend <name> <op>: <w.describe()> are not supported yet" (a CHECK failure).
  [[noreturn]] void refuse_weight(const char* op, const Weight& w) const;
  // "backend <name> <op>: KV cache dtype <dtype> is not supported yet" (a CHECK failure).
  [[noreturn]] void refuse_kv(const char* op, const KvCacheView& cache) const;
  static bool plain_kv(const KvCacheView& c) {
    return (c.dtype == DType::F32 || c.dtype == DType::BF16 || c.dtype == DType::F16) &&
           c.k_scales.empty() && c.v_scales.empty();
  }

 public:
  // ---- sampling on the device (optional; docs/cuda-backend.md "Sampling") -------------------
  // Backends that return true turn logits into token ids on the device, so only the ids cross to
  // the host. The engine checks this and otherwise (and for logprobs requests) downloads the
  // logits and samples with the CPU sampler (engine/sampler.h), whose semantics sample() follows:
  // penalties, then argmax when temperature == 0, else softmax(logits / T) restricted to the
  // top_k / top_p / min_p prefix of the (logit desc, id asc) order, one draw with `uniform`.
  virtual bool supports_sampling() const { return false; }
  // logits f32 [R, V] on the device; rows.size() == R; penalties[rows[r].penalty_begin ..
  // penalty_end) belong to row r (one entry per distinct token). host_ids [R] receives the ids
  // (synchronizes). `processed`, when not null, is f32 [R, V] on the device and receives the
  // penalised logits (tests). The default aborts: "sample is not implemented on backend X".
  virtual void sample(const Tensor& logits, const std::vector<SampleRow>& rows,
                      const std::vector<SamplePenalty>& penalties, int32_t* host_ids,
                      Tensor* processed = nullptr);

  // ---- batch-invariant mode (docs/cuda-backend.md "Batch invariance") ------------------------
  // When on, every op computes each output row with arithmetic that does not depend on what else
  // is in the batch: a token's logits are bit-identical whether it runs alone or batched with
  // other sequences, however its prompt was chunked, and whether its prefix came from the cache
  // (so greedy output cannot change with the batch). Applies to ops enqueued (and CUDA graphs
  // captured) after the call; may cost speed (measured in docs/cuda-backend.md). The default
  // refuses to turn it on: "batch-invariant mode is not implemented on backend X".
  virtual void set_batch_invariant(bool on) {
    SYV_CHECK(!on) << "batch-invariant mode is not implemented on backend " << name();
  }
  virtual bool batch_invariant() const { return false; }

  // ---- CUDA graphs (optional; docs/cuda-backend.md "CUDA graphs") ----------------------------
  // A backend that returns true records a step once and launches the recording again for later
  // batches of the same shape (the engine's decode buckets: engine/graph_runner.h). The defaults
  // (backend/graphs_default.cpp) abort naming the backend; callers check supports_graphs() first.
  virtual bool supports_graphs() const { return false; }
  // Runs `step` once as usual (a warm-up that sizes every scratch buffer), then records what it
  // enqueues into a graph without running it; returns the graph's id. `step` may do no host
  // synchronisation, and every host-side decision it makes (token / sequence / logit-row counts,
  // page-table width, kernel choices, split counts: see set_fixed_max_context) must hold for every
  // batch later replayed on it. The batch metadata its prepare_batch() uploads is re-read from
  // the graph's own pinned staging at each replay (see stage_batch()).
  virtual int capture_graph(const std::function<void()>& step);
  // Stages `batch`'s metadata for the next replay_graph() without enqueuing any work (what
  // prepare_batch() does minus the upload). The batch must have the layout of the batch captured
  // in the graph replayed next: the same token, sequence and logit-row counts and the same
  // max_pages_per_seq (replay_graph() checks).
  virtual void stage_batch(const Batch& batch, int32_t page_size);
  // Launches graph `id` on the metadata of the latest stage_batch() or prepare_batch(). Outputs
  // land where they landed during the capture (e.g. the model's logits buffer).
  virtual void replay_graph(int id);
  // Frees graph `id` (after its launches finish). Ids are not reused.
  virtual void destroy_graph(int id);
  // Host-side choices that follow the batch's longest context (decode attention's split count)
  // are made for `max_context` instead when it is > 0, so one capture serves every context up to
  // it; 0 (the default) = per batch. Applies to eager steps too, so a step gives the same bits
  // whether it runs eagerly or as a graph. The default does nothing (no such choices).
  virtual void set_fixed_max_context(int64_t max_context) { (void)max_context; }
};

// The CPU backend (always available).
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace syv
