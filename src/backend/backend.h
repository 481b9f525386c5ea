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
#include <memory>
#include <string>
#include <vector>

#include "backend/tensor.h"
#include "model/batch.h"

namespace syv {

class Backend;

// Owns one allocation in a backend's memory; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* backend, void* data, size_t bytes) : backend_(backend), data_(data), bytes_(bytes) {}
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

// Norm flavours: Qwen3 uses x̂·w; the hybrid families use the zero-centred x̂·(1 + w).
enum class NormKind : uint8_t { kPlain, kOnePlus };

struct RopeParams {
  double theta = 1e6;
  int32_t rotary_dim = 0;  // lanes [0, rotary_dim) rotate (rotate-half within them); rest pass
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
  int32_t page_size = 0;
  int32_t max_seq_len = 0;      // max new tokens of one sequence in this batch
  int32_t max_context_len = 0;  // max context_lens
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

  // ---- memory -------------------------------------------------------------------------------
  virtual DeviceBuffer allocate(size_t bytes) = 0;
  virtual void release(void* data) = 0;  // called by ~DeviceBuffer
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;  // synchronizes
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;           // device to device
  virtual void fill_zero(void* dst, size_t bytes) = 0;
  virtual void synchronize() = 0;

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

  // In place on q [T, Hq, D] and k [T, Hk, D]: per-head rmsnorm with q_norm/k_norm [D] (skipped when
  // empty), then RoPE (rotate-half) at meta.positions over the first rope.rotary_dim lanes.
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
};

// The CPU backend (always available).
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace syv
