// The CUDA backend: memory, batch metadata, op dispatch to the kernels, timing and graphs.
#include "backend/cuda/cuda_backend.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/deferred_copies.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/host_copy.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe.cuh"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda_choices.h"
#include "backend/gdn_chunks.h"
#include "backend/host_batch_meta.h"
#include "backend/memory_plan.h"
#include "backend/quant_layout.h"
#include "core/check.h"
#include "core/log.h"

namespace syv {
namespace cuda {

void cuda_fail(const char* file, int line, const char* expr, const char* what) {
  std::fprintf(stderr, "%s:%d: CUDA error: %s failed: %s\n", file, line, expr, what);
  std::fflush(stderr);
  std::abort();
}

}  // namespace cuda

namespace {

constexpr size_t kGemmWorkspace = 32u << 20;

bool is_float(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

// Size of the i-th dimension from the end (1 = last); aborts on a tensor of lower rank.
int64_t dim_from_end(const Tensor& t, int i) {
  SYV_CHECK(t.ndim >= i && t.ndim <= 4) << "tensor of rank " << t.ndim << " has no dim -" << i;
  return t.shape[static_cast<size_t>(t.ndim - i)];
}
int64_t last_dim(const Tensor& t) {
  return dim_from_end(t, 1);
}
int64_t rows_of(const Tensor& t) {
  const int64_t d = last_dim(t);
  return d == 0 ? 0 : t.numel() / d;
}

// Address ranges [base, base + bytes) that do not overlap: contains() finds the one holding a
// span. For the gather copy (copy_batch_async): which pointers are this device's memory and which
// are host memory mapped into its address space.
class AddressRanges {
 public:
  void add(const void* base, size_t bytes) { ranges_[address(base)] = bytes; }
  void remove(const void* base) { ranges_.erase(address(base)); }
  bool contains(const void* p, size_t bytes) const {
    auto it = ranges_.upper_bound(address(p));
    if (it == ranges_.begin()) return false;
    --it;
    return address(p) + bytes <= it->first + it->second;
  }

 private:
  static uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }
  std::map<uintptr_t, size_t> ranges_;
};

// The batch's state slots (one per sequence) for the hybrid ops.
const int32_t* hybrid_slots(const BatchMeta& meta) {
  SYV_CHECK(meta.state_slots.numel() == meta.seq_starts.numel() - 1)
      << "hybrid ops need one state slot per sequence (meta.state_slots has "
      << meta.state_slots.numel() << ", batch has " << meta.seq_starts.numel() - 1 << " sequences)";
  return meta.state_slots.as<int32_t>();
}

// Makes `device` the calling thread's current device for the scope and restores the previous one
// after (a no-op when it is current already): memory calls may come from a thread working on
// another device (the engine thread mirroring a tensor-parallel rank's cache copies, the loader
// copying every rank's weights), and cudaMalloc / cudaFree / kernels act on the current device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    SYV_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ == device) {
      previous_ = -1;
    } else {
      SYV_CUDA_CHECK(cudaSetDevice(device));
    }
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

class CudaBackendImpl final : public CudaBackend {
 public:
  explicit CudaBackendImpl(int device) : device_(device) {
    SYV_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    SYV_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    device_name_ = prop.name;
    sm_count_ = prop.multiProcessorCount;
    fp8_gemm_ = prop.major == 9;  // cuBLASLt's block-scaled fp8 GEMMs: Hopper only
    SYV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SYV_CUDA_CHECK(cudaEventCreateWithFlags(&staging_done_, cudaEventDisableTiming));
    SYV_CUDA_CHECK(cudaMalloc(&workspace_, kGemmWorkspace));
    scratch_bytes_ += kGemmWorkspace;
    gemm_.init(workspace_, kGemmWorkspace);
    SYV_CUDA_CHECK(cudaMalloc(&counters_, kCounterSlots * sizeof(unsigned)));
    SYV_CUDA_CHECK(cudaMemsetAsync(counters_, 0, kCounterSlots * sizeof(unsigned), stream_));
    scratch_bytes_ += kCounterSlots * sizeof(unsigned);
    SYV_CUDA_CHECK(cudaMalloc(&moe_routed_, sizeof(unsigned long long)));
    SYV_CUDA_CHECK(cudaMemsetAsync(moe_routed_, 0, sizeof(unsigned long long), stream_));
    scratch_bytes_ += sizeof(unsigned long long);
    SYV_CUDA_CHECK(cudaMalloc(&moe_ticket_, sizeof(unsigned)));
    SYV_CUDA_CHECK(cudaMemsetAsync(moe_ticket_, 0, sizeof(unsigned), stream_));
    scratch_bytes_ += sizeof(unsigned);
    if (const char* env = std::getenv("SYV_GEMV_MAX_TOKENS")) gemv_max_tokens_ = std::atoi(env);
    if (const char* env = std::getenv("SYV_GDN_PHASES")) gdn_phases_ = std::atoi(env) != 0;
    if (const char* env = std::getenv("SYV_QUANT_GEMV_MAX_TOKENS"))
      quant_gemv_max_tokens_ = std::max(0, std::atoi(env));
    if (const char* env = std::getenv("SYV_FP8_GEMV_MAX_TOKENS"))
      fp8_gemv_max_tokens_ = std::max(0, std::atoi(env));
    if (const char* env = std::getenv("SYV_QUANT_GEMM_BEFORE_FP8_MAX_TOKENS"))
      quant_gemm_before_fp8_max_tokens_ = std::max(0, std::atoi(env));
    if (const char* env = std::getenv("SYV_FP8_NORM_QUANT")) fp8_norm_quant_ = std::atoi(env) != 0;
    if (const char* env = std::getenv("SYV_FP8_SKINNY_MAX_TOKENS"))
      set_fp8_skinny_max_tokens(std::atoi(env));
    if (const char* env = std::getenv("SYV_QUANT_GEMV_MMA")) quant_gemv_mma_ = std::atoi(env) != 0;
    if (const char* env = std::getenv("SYV_QUANT_FUSE")) quant_fuse_ = std::atoi(env) != 0;
    if (const char* env = std::getenv("SYV_QUANT_GEMM_MAX_TOKENS"))
      quant_gemm_max_tokens_ = std::max(0, std::atoi(env));
    if (const char* env = std::getenv("SYV_QUANT_DEQUANT_VEC"))
      quant_dequant_vec_ = std::atoi(env) != 0;
    if (std::optional<bool> forced = cuda_forced_moe_experts_quantized()) {
      quant_moe_ = *forced;
      quant_moe_forced_ = true;
    }
    if (const char* env = std::getenv("SYV_QUANT_MOE_GEMV")) quant_moe_gemv_ = std::atoi(env) != 0;
    if (const char* env = std::getenv("SYV_QUANT_MOE_GEMM")) quant_moe_gemm_ = std::atoi(env) != 0;
    if (const char* env = std::getenv("SYV_ACT_ORDER_PERM")) act_order_perm_ = std::atoi(env) != 0;
    if (const char* env = std::getenv("SYV_DEFER_COPIES"))
      defer_copies_enabled_ = std::atoi(env) != 0;
    if (const char* env = std::getenv("SYV_AHEAD_STREAM")) {
      SYV_CHECK(env == std::string("out") || env == std::string("own"))
          << "SYV_AHEAD_STREAM: expected own or out, found " << env;
      ahead_on_out_stream_ = env == std::string("out");
    }
    if (const char* env = std::getenv("SYV_STEP_UPLOADS")) {
      SYV_CHECK(env == std::string("mapped") || env == std::string("copies"))
          << "SYV_STEP_UPLOADS: expected mapped or copies, found " << env;
      step_uploads_mapped_ = env == std::string("mapped");
    }
    if (const char* env = std::getenv("SYV_HOST_COPY")) {
      // PATH (both ways) or IN:OUT, each engines, kernel or calls; split = engines:kernel.
      std::string in = env == std::string("split") ? "engines:kernel" : env, out = in;
      if (const size_t colon = in.find(':'); colon != std::string::npos) {
        out = in.substr(colon + 1);
        in = in.substr(0, colon);
      }
      auto parse = [&](const std::string& p) {
        SYV_CHECK(p == "engines" || p == "kernel" || p == "calls")
            << "SYV_HOST_COPY: expected engines, kernel, calls, split or IN:OUT of those, found "
            << env;
        return p == "engines"  ? BatchCopyPath::kCopyEngines
               : p == "kernel" ? BatchCopyPath::kGatherKernel
                               : BatchCopyPath::kCopyCalls;
      };
      batch_copy_path_[0] = parse(in);
      batch_copy_path_[1] = parse(out);
    }
    init_batch_invariant_from_env();
  }

  ~CudaBackendImpl() override {
    DeviceScope on(device_);
    issue_deferred();
    cudaStreamSynchronize(stream_);
    for (size_t id = 0; id < graphs_.size(); ++id) free_graph(graphs_[id]);
    for (auto& r : retired_partials_) cudaFree(r.first);
    if (staging_) cudaFreeHost(staging_);
    if (meta_dev_) cudaFree(meta_dev_);
    if (gdn_scratch_) cudaFree(gdn_scratch_);
    if (partial_) cudaFree(partial_);
    if (dequant_) cudaFree(dequant_);
    if (moe_scratch_) cudaFree(moe_scratch_);
    if (moe_dequant_) cudaFree(moe_dequant_);
    if (perm_x_) cudaFree(perm_x_);
    if (moe_routed_) cudaFree(moe_routed_);
    if (moe_ticket_) cudaFree(moe_ticket_);
    if (sample_dev_) cudaFree(sample_dev_);
    if (sample_work_) cudaFree(sample_work_);
    if (sample_ids_host_) cudaFreeHost(sample_ids_host_);
    if (sample_in_host_) cudaFreeHost(sample_in_host_);
    if (workspace_) cudaFree(workspace_);
    if (counters_) cudaFree(counters_);
    cudaEventDestroy(staging_done_);
    for (cudaStream_t copies : copy_streams_) {
      if (copies == nullptr) continue;
      cudaStreamSynchronize(copies);
      cudaStreamDestroy(copies);
    }
    if (compute_mark_ != nullptr) cudaEventDestroy(compute_mark_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override {
    return "cuda:" + std::to_string(device_) + " " + device_name_;
  }
  DType activation_dtype() const override { return DType::BF16; }
  DType weight_dtype(DType file_dtype) const override {
    return is_float(file_dtype) ? DType::BF16 : file_dtype;
  }
  void make_current() override { SYV_CUDA_CHECK(cudaSetDevice(device_)); }
  void* cuda_stream() const override { return stream_; }

  // ---- memory ---------------------------------------------------------------------------------
  DeviceBuffer allocate(size_t bytes) override {
    if (bytes == 0) return DeviceBuffer();
    DeviceScope on(device_);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      size_t free_b = 0, total_b = 0;
      cudaGetLastError();
      cudaMemGetInfo(&free_b, &total_b);
      SYV_FATAL() << "CUDA backend: cudaMalloc of " << bytes << " bytes failed ("
                  << cudaGetErrorString(err) << "); free " << free_b << " of " << total_b
                  << " bytes";
    }
    allocated_ += bytes;
    sizes_.push_back({p, bytes});
    device_ranges_.add(p, bytes);
    if (fill_seed_ != 0)
      cuda::launch_fill_random(p, DType::BF16, static_cast<int64_t>(bytes / 2), fill_seed_++, 1.f,
                               stream_);
    return DeviceBuffer(this, p, bytes);
  }
  DeviceBuffer allocate_host_resident(size_t bytes) override {
    if (bytes == 0) return DeviceBuffer();
    DeviceScope on(device_);
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (err != cudaSuccess) {
      cudaGetLastError();
      SYV_FATAL() << "CUDA backend: cudaHostAlloc of " << bytes
                  << " bytes of mapped host memory failed (" << cudaGetErrorString(err)
                  << "); run without --host-embeddings";
    }
    void* dev = nullptr;
    SYV_CUDA_CHECK(cudaHostGetDevicePointer(&dev, p, 0));
    // Kernels get the buffer's own address: with unified addressing (every 64-bit platform CUDA
    // 13 supports) the mapping is at the host address.
    SYV_CHECK(dev == p) << "CUDA backend: mapped host memory at another device address";
    host_resident_.push_back(p);
    return DeviceBuffer(this, p, bytes);
  }
  bool host_resident_frees_device_memory() const override { return true; }
  void release(void* data) override {
    issue_deferred();  // a deferred copy may still name it
    const auto host = std::find(host_resident_.begin(), host_resident_.end(), data);
    if (host != host_resident_.end()) {
      host_resident_.erase(host);
      SYV_CUDA_CHECK(cudaFreeHost(data));
      return;
    }
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (sizes_[i].first == data) {
        allocated_ -= sizes_[i].second;
        sizes_[i] = sizes_.back();
        sizes_.pop_back();
        break;
      }
    }
    device_ranges_.remove(data);
    DeviceScope on(device_);
    SYV_CUDA_CHECK(cudaFree(data));
  }
  void upload(void* dst, const void* host_src, size_t bytes) override {
    if (bytes == 0) return;
    DeviceScope on(device_);
    SYV_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void download(void* host_dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    DeviceScope on(device_);
    SYV_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    DeviceScope on(device_);
    SYV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void fill_zero(void* dst, size_t bytes) override {
    if (bytes == 0) return;
    DeviceScope on(device_);
    SYV_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
  }
  void synchronize() override {
    DeviceScope on(device_);
    SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // ---- asynchronous copies: three copy streams (CopyDir::kIn, kOut, kAhead), each ordered after
  // the compute stream at each call ---------------------------------------------------------------
  // Separate streams so that a write-back (device -> host, kOut) and the step ordered after it
  // never queue behind a load in flight (host -> device, kIn): on one in-order stream, a step that
  // evicted a page during a 32K-token load waited for the whole load (~75 ms on an H200; the other
  // sequences' decode ran at 0.15 of its speed over the loading steps); nor behind a write-ahead
  // batch (kAhead: device -> host too, hundreds of pages nothing waits for). Copies of different
  // streams are ordered only through the compute stream (backend.h CopyDir).
  CopyEvent copy_async(void* dst, const void* src, size_t bytes, CopyDir dir) override {
    if (deferring_) return defer_copy({CopyOp{dst, src, bytes}}, dir);
    cudaStream_t copies = copy_stream_after_compute(dir);
    if (bytes > 0) SYV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, copies));
    return record_copy_event(copies);
  }
  // The batch on the stream of `dir` after one ordering, with one event: when its rows are many
  // small copies between this device and mapped pinned host memory, as one batch
  // (batch_copy_path(): one cudaMemcpy3DBatchAsync of the ops as strided copies, or one gather
  // kernel of their rows, host_copy.h), else as cudaMemcpyAsync / cudaMemcpy2DAsync calls back to
  // back.
  CopyEvent copy_batch_async(const std::vector<CopyOp>& ops, CopyDir dir) override {
    if (deferring_) return defer_copy(ops, dir);
    cudaStream_t copies = copy_stream_after_compute(dir);
    issue_batch(ops, copies, dir);
    return record_copy_event(copies);
  }
  // `ops` on `copies` (ordered already), the way copy_batch_async() documents.
  void issue_batch(const std::vector<CopyOp>& ops, cudaStream_t copies, CopyDir dir) {
    if (batch_copy_path(dir) != BatchCopyPath::kCopyCalls && gather_fits(ops)) {
      ++batched_copies_;
      if (!copy_engines_batch(ops, copies, dir)) {
        gather_segments(ops);
        cuda::launch_gather_copy(segments_.data(), segments_.size(), copies);
        ++gather_batches_;
      }
    } else {
      for (const CopyOp& op : ops) {
        if (op.bytes == 0 || op.rows == 0) continue;
        if (op.rows == 1) {
          SYV_CUDA_CHECK(cudaMemcpyAsync(op.dst, op.src, op.bytes, cudaMemcpyDefault, copies));
        } else {
          SYV_CUDA_CHECK(cudaMemcpy2DAsync(op.dst, op.dst_pitch, op.src, op.src_pitch, op.bytes,
                                           op.rows, cudaMemcpyDefault, copies));
        }
      }
    }
  }

  // ---- deferred issue (Backend::defer_copies(), deferred_copies.h) ---------------------------
  void defer_copies() override { deferring_ = defer_copies_enabled_; }
  void flush_copies() override {
    issue_deferred();
    deferring_ = false;
  }
  CopyEvent defer_copy(const std::vector<CopyOp>& ops, CopyDir dir) {
    CopyEvent event = new_copy_event();
    deferred_.add_copy(dir, ops, event, stream_);
    ++deferred_calls_;
    return event;
  }
  // Issues every deferred call (a wait or query on one of them, a release of memory, the
  // flush); deferring goes on until flush_copies().
  void issue_deferred() {
    if (deferred_.empty()) return;
    DeviceScope on(device_);
    deferred_.issue_all([&](const cuda::DeferredCopies::Command& c) {
      cudaStream_t copies = copy_stream(c.dir);
      if (c.mark == nullptr) {
        SYV_CUDA_CHECK(cudaStreamWaitEvent(copies, static_cast<cudaEvent_t>(c.event.handle()), 0));
        return;
      }
      SYV_CUDA_CHECK(cudaStreamWaitEvent(copies, c.mark, 0));
      issue_batch(c.ops, copies, c.dir);
      SYV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(c.event.handle()), copies));
    });
  }
  void issue_deferred_if_holds(const CopyEvent& event) {
    if (deferred_.holds(event)) issue_deferred();
  }
  uint64_t deferred_copy_calls() const override { return deferred_calls_; }
  void set_defer_copies(bool on) override {
    if (!on) flush_copies();
    defer_copies_enabled_ = on;
  }
  // `ops` as one cudaMemcpy3DBatchAsync on `copies` when that is the path of `dir`; false
  // otherwise, or where the call fails (then the kernel copies the batch, and every batch from now
  // on, both ways, logged once).
  bool copy_engines_batch(const std::vector<CopyOp>& ops, cudaStream_t copies, CopyDir dir) {
    if (batch_copy_path(dir) != BatchCopyPath::kCopyEngines) return false;
    strided_.clear();
    for (const CopyOp& op : ops)
      strided_.push_back({op.dst, op.src, op.bytes, op.rows, op.dst_pitch, op.src_pitch});
    const char* why = nullptr;
    if (cuda::memcpy_strided_batch_async(strided_.data(), strided_.size(), copies, &why))
      return true;
    SYV_LOG(WARN) << "CUDA backend: cudaMemcpy3DBatchAsync failed (" << why
                  << "); host tier copies take the gather kernel from now on";
    batch_copy_path_[0] = batch_copy_path_[1] = BatchCopyPath::kGatherKernel;
    return false;
  }
  void set_batch_copy_path(CopyDir dir, BatchCopyPath path) override {
    batch_copy_path_[dir == CopyDir::kIn ? 0 : 1] = path;  // kOut and kAhead: device -> host
  }
  BatchCopyPath batch_copy_path(CopyDir dir) const override {
    return batch_copy_path_[dir == CopyDir::kIn ? 0 : 1];
  }
  uint64_t batched_copies() const override { return batched_copies_; }
  uint64_t gather_batches() const override { return gather_batches_; }
  // Whether `ops` go as one batch: at least kGatherMinOps rows, on average at most
  // kGatherMaxMeanBytes, each 16-byte aligned (base and pitch) and between this device's memory
  // and host memory the kernel can address (pinned by this backend). Checked per op, over the
  // span of its rows: a 32K-token host hit is ~500 ops of 72 rows.
  bool gather_fits(const std::vector<CopyOp>& ops) const {
    size_t total = 0, rows = 0;
    for (const CopyOp& op : ops) {
      if (op.rows == 0 || op.bytes == 0) continue;
      const size_t src_span = (op.rows - 1) * op.src_pitch + op.bytes;
      const size_t dst_span = (op.rows - 1) * op.dst_pitch + op.bytes;
      const bool h2d =
          host_ranges_.contains(op.src, src_span) && device_ranges_.contains(op.dst, dst_span);
      const bool d2h = !h2d && device_ranges_.contains(op.src, src_span) &&
                       host_ranges_.contains(op.dst, dst_span);
      const size_t pitches = op.rows > 1 ? (op.src_pitch | op.dst_pitch) : 0;
      if (!(h2d || d2h) || !cuda::gather_copy_fits({op.dst, op.src, op.bytes}) ||
          (pitches & 15u) != 0)
        return false;
      total += op.total_bytes();
      rows += op.rows;
    }
    return rows >= kGatherMinOps && total <= kGatherMaxMeanBytes * rows;
  }
  // The rows of `ops` as the gather kernel's segments (in segments_).
  void gather_segments(const std::vector<CopyOp>& ops) {
    segments_.clear();
    for (const CopyOp& op : ops)
      for (size_t r = 0; r < op.rows && op.bytes > 0; ++r)
        segments_.push_back({op.row_dst(r), op.row_src(r), op.bytes});
  }
  // The copy stream of `dir` (created on first use), made to wait for everything enqueued on the
  // compute stream so far: its ops, and its waits on earlier copies of any stream
  // (order_after_copy), which is what orders a copy after one of another stream.
  cudaStream_t copy_stream_after_compute(CopyDir dir) {
    cudaStream_t copies = copy_stream(dir);
    // One mark event serves every stream: cudaStreamWaitEvent waits for the record made last
    // before it, and each call records afresh.
    SYV_CUDA_CHECK(cudaEventRecord(compute_mark_, stream_));
    SYV_CUDA_CHECK(cudaStreamWaitEvent(copies, compute_mark_, 0));
    return copies;
  }
  // The copy stream of `dir`, created on first use (with the compute mark).
  cudaStream_t copy_stream(CopyDir dir) {
    if (dir == CopyDir::kAhead && ahead_on_out_stream_) dir = CopyDir::kOut;
    cudaStream_t& copies = copy_streams_[static_cast<size_t>(dir)];
    if (copies == nullptr) {
      SYV_CUDA_CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
      if (compute_mark_ == nullptr)
        SYV_CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
    }
    return copies;
  }
  CopyEvent record_copy_event(cudaStream_t copies) {
    CopyEvent event = new_copy_event();
    SYV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event.handle()), copies));
    return event;
  }
  static CopyEvent new_copy_event() {
    cudaEvent_t done = nullptr;
    SYV_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    return CopyEvent(std::shared_ptr<void>(
        static_cast<void*>(done), [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }));
  }
  // Page-locked host memory for a host tier: cudaMemcpyAsync from/to it is a true DMA that
  // overlaps with compute (pageable memory would be staged and synchronous).
  Result<PinnedBuffer> allocate_pinned(size_t bytes) override {
    if (bytes == 0) return PinnedBuffer();
    void* p = nullptr;
    // This device's context, and portable so that every context sees the memory as pinned.
    SYV_CUDA_CHECK(cudaSetDevice(device_));
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return Status::Error("CUDA backend: cudaHostAlloc of " + std::to_string(bytes >> 20) +
                           " MiB of pinned host memory failed (" + cudaGetErrorString(err) +
                           "); lower --host-cache-gb");
    }
    host_ranges_.add(p, bytes);  // cudaHostAlloc memory is mapped at its host address (UVA)
    return PinnedBuffer(p, bytes, [this](void* q) {
      issue_deferred();  // a deferred copy may still name it
      host_ranges_.remove(q);
      cudaFreeHost(q);
    });
  }
  // Registers pages already faulted in: portable (every context sees it pinned) and mapped. The
  // gather copy uses it when the device can address it at its host pointer (H100/H200 on x86
  // can; cudaDevAttrCanUseHostPointerForRegisteredMem), else cudaMemcpyAsync does.
  bool pins_host_memory() const override { return true; }
  Result<PinnedBuffer> pin_host_pages(HostPages pages) override {
    const size_t bytes = pages.bytes();
    if (bytes == 0) return PinnedBuffer();
    SYV_CUDA_CHECK(cudaSetDevice(device_));
    const cudaError_t err =
        cudaHostRegister(pages.data(), bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return Status::Error("CUDA backend: cudaHostRegister of " + std::to_string(bytes >> 20) +
                           " MiB of host memory failed (" + cudaGetErrorString(err) +
                           "); lower --host-cache-gb");
    }
    if (host_pointer_mapped_ < 0) {
      int v = 0;
      SYV_CUDA_CHECK(
          cudaDeviceGetAttribute(&v, cudaDevAttrCanUseHostPointerForRegisteredMem, device_));
      host_pointer_mapped_ = v;
    }
    void* p = pages.release();
    if (host_pointer_mapped_ == 1) host_ranges_.add(p, bytes);
    return PinnedBuffer(p, bytes, [this, bytes](void* q) {
      issue_deferred();  // a deferred copy may still name it
      host_ranges_.remove(q);
      cudaHostUnregister(q);
      free_host_pages(q, bytes);
    });
  }
  void wait_copy(const CopyEvent& event) override {
    issue_deferred_if_holds(event);
    if (!event.empty())
      SYV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event.handle())));
  }
  bool copy_done(const CopyEvent& event) override {
    if (event.empty()) return true;
    issue_deferred_if_holds(event);  // else a poll would wait for a copy never issued
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event.handle()));
    if (err == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: clear it, as allocate_pinned() does after a failure
      return false;
    }
    SYV_CUDA_CHECK(err);
    return true;
  }
  void order_after_copy(const CopyEvent& event) override {
    issue_deferred_if_holds(event);
    if (!event.empty())
      SYV_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event.handle()), 0));
  }
  void order_copies_after_copy(const CopyEvent& event, CopyDir dir) override {
    if (deferring_ && !event.empty()) {
      deferred_.add_wait(dir, event);
      return;
    }
    if (!event.empty())
      SYV_CUDA_CHECK(
          cudaStreamWaitEvent(copy_stream(dir), static_cast<cudaEvent_t>(event.handle()), 0));
  }

  // ---- batch metadata -------------------------------------------------------------------------
  // All i32 arrays go into one pinned staging buffer and one device buffer (one copy per step).
  // Eager steps use the backend's own pair (grown as needed); while a graph is captured, the
  // graph's own pair (sized by the warm-up run), which no later step can move.
  BatchMeta prepare_batch(const Batch& batch, int32_t page_size) override {
    Graph* g = capturing_ ? &graphs_.back() : nullptr;
    if (g != nullptr) {
      SYV_CHECK(g->prepares++ == 0) << "CUDA graph capture: the step calls prepare_batch() twice";
    }
    const Staged st = stage(batch, page_size, g);
    void* dev = g ? g->dev : meta_dev_;
    upload_staged(dev, g ? g->host : staging_, g ? g->host_dev : staging_dev_, st.bytes);
    if (g == nullptr) SYV_CUDA_CHECK(cudaEventRecord(staging_done_, stream_));

    const int64_t T = batch.num_tokens(), S = batch.num_seqs();
    const int64_t R = static_cast<int64_t>(batch.logit_rows.size());
    int32_t* d = static_cast<int32_t*>(dev);
    auto view = [&](int part, std::initializer_list<int64_t> dims) {
      return Tensor(d + st.offsets[static_cast<size_t>(part)], DType::I32, dims);
    };
    BatchMeta meta;
    meta.host = &batch_copy_;
    meta.token_ids = view(0, {T});
    meta.positions = view(1, {T});
    meta.seq_starts = view(2, {S + 1});
    meta.context_lens = view(3, {S});
    meta.page_table = view(4, {st.pt_rows, st.pt_width});
    meta.slot_mapping = view(5, {T});
    meta.token_seq = view(6, {T});
    meta.logit_rows = view(7, {R});
    meta.state_slots = view(8, {st.counts[8]});
    meta.state_saves = view(10, {st.counts[10]});
    meta.num_state_saves = batch.num_state_saves();
    meta.page_size = page_size;
    meta.max_seq_len = st.max_seq_len;
    meta.max_context_len = st.max_context_len;
    tiles_dev_ = d + st.offsets[9];
    return meta;
  }

  void stage_batch(const Batch& batch, int32_t page_size) override {
    SYV_CHECK(!capturing_) << "stage_batch() during a graph capture";
    stage(batch, page_size, nullptr);
  }

  // ---- ops ------------------------------------------------------------------------------------
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    SYV_CHECK(ids.dtype == DType::I32) << "embedding: ids must be i32";
    SYV_CHECK_EQ(last_dim(table), last_dim(out)) << "embedding: hidden size";
    SYV_CHECK_EQ(ids.numel(), rows_of(out)) << "embedding: rows";
    cuda::launch_embedding(table.data, table.dtype, table.dim(0), last_dim(table),
                           ids.as<int32_t>(), ids.numel(), out.data, out.dtype, stream_);
  }

  void rmsnorm(const Tensor& x, const Tensor& w, float eps, NormKind kind, Tensor& out) override {
    SYV_CHECK_EQ(x.numel(), out.numel()) << "rmsnorm: x vs out";
    SYV_CHECK_EQ(w.numel(), last_dim(x)) << "rmsnorm: weight size";
    cuda::launch_rmsnorm(x.data, x.dtype, nullptr, x.dtype, w.data, w.dtype, eps,
                         kind == NormKind::kOnePlus, out.data, out.dtype, rows_of(x), last_dim(x),
                         stream_);
  }

  void add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, NormKind kind,
                   Tensor& out) override {
    SYV_CHECK_EQ(x.numel(), residual.numel()) << "add_rmsnorm: x vs residual";
    SYV_CHECK_EQ(x.numel(), out.numel()) << "add_rmsnorm: x vs out";
    SYV_CHECK_EQ(w.numel(), last_dim(x)) << "add_rmsnorm: weight size";
    cuda::launch_rmsnorm(x.data, x.dtype, residual.data, residual.dtype, w.data, w.dtype, eps,
                         kind == NormKind::kOnePlus, out.data, out.dtype, rows_of(x), last_dim(x),
                         stream_);
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) override {
    const int64_t K = last_dim(x), T = rows_of(x), N = w.dim(0);
    SYV_CHECK_EQ(last_dim(w), K) << "linear: w [N, K] vs x [T, K]";
    SYV_CHECK_EQ(out.numel(), T * N) << "linear: out must be [T, N]";
    bool done = false;
    if (x.dtype == DType::BF16 && w.dtype == DType::BF16 &&
        (out.dtype == DType::BF16 || out.dtype == DType::F32)) {
      if (batch_invariant_) {
        done = !invariant_gemm_mma_ &&
               gemm_.run_fixed(x.data, w.data, out.data, out.dtype, T, N, K, stream_);
        if (!done)
          done = cuda::launch_gemm_invariant(x.data, w.data, out.data, out.dtype, T, N, K,
                                             invariant_tile_, sm_count_, stream_);
      } else {
        if (T <= gemv_max_tokens_)
          done = cuda::launch_gemv_bf16(x.data, w.data, out.data, out.dtype, T, N, K, stream_);
        if (!done) done = gemm_.run(x.data, w.data, out.data, out.dtype, T, N, K, stream_);
      }
    }
    if (!done)  // one warp per output, the same order at any T: batch-invariant too
      cuda::launch_linear_generic(x.data, x.dtype, w.data, w.dtype, out.data, out.dtype, T, N, K,
                                  stream_);
    if (!bias.empty()) {
      SYV_CHECK_EQ(bias.numel(), N) << "linear: bias size";
      cuda::launch_bias_add(out.data, out.dtype, bias.data, bias.dtype, T, N, stream_);
    }
  }

  // ---- quantized weights (backend/weight.h; docs/cuda-backend.md "Quantized weights") ---------
  // Every canonical format runs: up to quant_gemv_max_tokens_ tokens through the GEMVs of
  // quant_linear.cu (packed weights streamed once, dequantized in registers), more tokens (and
  // shapes the GEMV does not take, and every call in batch-invariant mode) by dequantizing the
  // weight into the bf16 scratch and running linear() on it: cuBLASLt, or the batch-invariant GEMM.
  bool supports_quantized_weights() const override { return true; }
  // The norm kernel reads `residual` and writes `residual_out` (the default sequence copies first),
  // then the quantized linear (with the SiLU in its epilogue when `act` is given): what
  // norm_linear() does for a dense weight beyond the GEMV sizes. The norm is not fused into the
  // GEMV as it is for a dense weight: every block of the one-tile-per-block tensor-core GEMV
  // recomputing it made a gptq decode step 0.9 ms slower (docs/cuda-backend-notes.md "Run 16").
  void add_rmsnorm_quantized(const Tensor& residual, const Tensor& x, const Tensor& norm_w,
                             float eps, NormKind kind, Tensor& residual_out, Tensor& normed,
                             const Weight& w, const Tensor& bias, Tensor& out,
                             Tensor* act) override {
    check_add_norm(residual, x, norm_w, residual_out, normed);
    if (!add_rmsnorm_fp8(residual, x, norm_w, eps, kind, residual_out, normed, w, out)) {
      cuda::launch_add_rmsnorm(x.data, x.dtype, residual.data, residual_out.data, residual.dtype,
                               norm_w.data, norm_w.dtype, eps, kind == NormKind::kOnePlus,
                               normed.data, normed.dtype, rows_of(x), last_dim(x), stream_);
    }
    if (act != nullptr) {
      SYV_CHECK(bias.empty()) << "add_rmsnorm_linear_silu_mul: no bias";
      linear_quantized_silu_mul(normed, w, out, *act);
    } else {
      linear_quantized(normed, w, bias, out);
    }
    fp8_staged_ = Fp8Staged();  // consumed or not: only the call just made may read it
  }
  // add_rmsnorm_quantized()'s norm writing the W8A8 GEMM's e4m3 activations as well
  // (set_fp8_norm_quant), where linear_quantized() tries that GEMM first (fp8 weight w, bf16
  // tensors; above the GEMVs' share or past fp8's, not the W8A16 GEMM's) in one row chunk. Leaves
  // fp8_staged_ for linear_fp8(). False, having launched nothing (the scratch perhaps grown to
  // what linear_fp8() would grow it to), elsewhere.
  bool add_rmsnorm_fp8(const Tensor& residual, const Tensor& x, const Tensor& norm_w, float eps,
                       NormKind kind, Tensor& residual_out, Tensor& normed, const Weight& w,
                       const Tensor& out) {
    if (!fp8_norm_quant_ || !w.perm.empty() || w.format != WeightFormat::kFp8Block ||
        !all_bf16({&x, &residual, &residual_out, &normed}) || last_dim(x) != w.k)
      return false;
    check_quantized_layout(w);
    const cuda::QuantWeight q = quant_weight(w);
    const int64_t T = rows_of(x), K = w.k;
    const bool fp8_first = (!takes_quant_gemv(T, normed) || fp8_gemm_before_gemv(T, normed, q)) &&
                           !quant_gemm_before_fp8(T, q, out.dtype) && fp8_gemm_takes(normed, q);
    if (!fp8_first) return false;
    ensure_dequant(std::min(q.n * q.k * 2, dequant_row_chunk_cap_));  // linear_fp8()'s, first
    const int64_t rows = fp8_chunk_rows(T, q, out.dtype);
    if (rows < T ||
        (!fp8_skinny_takes(std::min(T, rows), q, out.dtype) &&
         !gemm_.fp8_runs(rows, q.n, K, out.dtype, cuda::LtGemm::Fp8WeightScales::kTile128)))
      return false;
    auto* x8 = static_cast<uint8_t*>(dequant_);  // linear_fp8()'s x8 and x_scales
    auto* scales = reinterpret_cast<float*>(x8 + aligned256(rows * K));
    if (!cuda::launch_add_rmsnorm_fp8(x.data, residual.data, residual_out.data, norm_w.data,
                                      norm_w.dtype, eps, kind == NormKind::kOnePlus, normed.data,
                                      x8, scales, T, rows, K, stream_))
      return false;
    fp8_staged_ = {normed.data, T, K, rows};
    return true;
  }
  // The SiLU·mul in the tensor-core GEMV's epilogue where linear_quantized() would take that
  // GEMV (gate_up still written); else the two ops.
  void linear_quantized_silu_mul(const Tensor& x, const Weight& w, Tensor& gate_up,
                                 Tensor& out) override {
    const int64_t T = rows_of(x);
    if (w.perm.empty() && quant_fuse_ && quant_gemv_mma_ && takes_quant_gemv(T, x) &&
        !fp8_gemm_before_gemv(T, x, quant_weight(w)) && last_dim(x) == w.k &&
        gate_up.numel() == T * w.n && out.numel() * 2 == T * w.n && all_bf16({&gate_up, &out})) {
      check_quantized_layout(w);
      if (cuda::launch_quant_gemv_mma_silu(quant_weight(w), x.data, gate_up.data, out.data, T,
                                           stream_)) {
        ++quant_calls_.silu_epilogues;
        return;
      }
    }
    Backend::linear_quantized_silu_mul(x, w, gate_up, out);
  }
  // Whether linear_quantized() tries the quantized GEMVs for T tokens of x (else the fp8 GEMM or
  // the dequantized dense GEMM).
  bool takes_quant_gemv(int64_t T, const Tensor& x) const {
    return !batch_invariant_ && T <= quant_gemv_max_tokens_ && x.dtype == DType::BF16;
  }
  // Whether linear_quantized() takes fp8 weight w past the GEMVs' share for T tokens of x
  // (kFp8GemvMaxTokens): where the fp8 GEMM takes them but for the cuBLASLt heuristic; the
  // tensor-core GEMM first where quant_gemm_before_fp8() says so (where both refuse,
  // linear_quantized() still takes the GEMV).
  bool fp8_gemm_before_gemv(int64_t T, const Tensor& x, const cuda::QuantWeight& q) const {
    return q.kind == cuda::QuantKind::kFp8Block && T > fp8_gemv_max_tokens_ && fp8_gemm_takes(x, q);
  }
  // Whether fp8 weight q takes the tensor-core GEMM before the fp8 GEMM at T tokens
  // (kQuantGemmBeforeFp8MaxTokens): past the GEMV's share, where the fp8 GEMM would be cuBLASLt's
  // (not syv's own kernel, fp8_skinny_takes) and its 128-row weight tiles are fewer than the SMs.
  bool quant_gemm_before_fp8(int64_t T, const cuda::QuantWeight& q, DType out_t) const {
    return q.kind == cuda::QuantKind::kFp8Block && T > fp8_gemv_max_tokens_ &&
           T <= quant_gemm_before_fp8_max_tokens_ && (q.n + 127) / 128 < sm_count_ &&
           !fp8_skinny_takes(T, q, out_t);
  }
  // linear_fp8()'s conditions on x and q, all but the scratch room and the cuBLASLt heuristic.
  bool fp8_gemm_takes(const Tensor& x, const cuda::QuantWeight& q) const {
    if (!fp8_gemm_ || batch_invariant_ || quantized_activations_ == QuantizedActivations::kOff)
      return false;
    if (x.dtype != DType::BF16 || !cuda::fp8_activation_groups_supported(q.k, x.data)) return false;
    if (q.kind == cuda::QuantKind::kInt4Group)
      return quantized_activations_ == QuantizedActivations::kFp8 && cuda::int4_to_fp8_supported(q);
    // cuBLASLt's tile scales: [ceil(N / 128)][K / 128] with rows padded to 4 scales; taken where
    // the padding is none.
    const int64_t G = q.k / 128;
    return q.block_n == 128 && q.block_k == 128 && q.scale_cols == G && G % 4 == 0;
  }
  // Whether linear_quantized() tries the tensor-core GEMM for T tokens (after the GEMVs, before
  // or after the fp8 GEMM as linear_quantized() orders them, before the dequantize path).
  bool takes_quant_gemm(int64_t T, const Tensor& x) const {
    return !batch_invariant_ && T <= quant_gemm_max_tokens_ && x.dtype == DType::BF16;
  }
  static cuda::QuantWeight quant_weight(const Weight& w) {
    cuda::QuantWeight q;
    q.kind = w.format == WeightFormat::kFp8Block ? cuda::QuantKind::kFp8Block
                                                 : cuda::QuantKind::kInt4Group;
    q.data = w.tensor.data;
    q.scales = w.scales.as<float>();
    q.zeros = w.zeros.empty() ? nullptr : static_cast<const uint8_t*>(w.zeros.data);
    q.g_idx = w.g_idx.empty() ? nullptr : w.g_idx.as<int32_t>();
    q.perm = w.perm.empty() ? nullptr : w.perm.as<int32_t>();
    q.n = w.n;
    q.k = w.k;
    q.scale_cols = w.scales.dim(1);
    q.block_n = w.block_n;
    q.block_k = w.block_k;
    q.group_size = w.group_size;
    return q;
  }
  // The dequantization scratch is sized at load for the largest quantized weight's share, so the
  // memory plan (made after the load) counts it and no step grows it: a weight the dequantize path
  // takes in row chunks (backend/cuda_choices.h cuda_dequant_in_row_chunks) counts at most
  // dequant_row_chunk_cap_ (linear_dequantized_in_row_chunks).
  void reserve_quantized_scratch(const Weight& w, QuantWeightRole role) override {
    const int64_t whole = w.n * w.k * 2;
    ensure_dequant(cuda_dequant_in_row_chunks(role, int4_w4a16(w.format))
                       ? std::min(whole, dequant_row_chunk_cap_)
                       : whole);
  }
  // Whether an int4 weight's GEMMs take bf16 activations (W4A16; --quantized-activations fp8 asks
  // for W4A8, whose e4m3 copy of the weight lives in the scratch).
  bool int4_w4a16(WeightFormat f) const {
    return f == WeightFormat::kInt4Group && quantized_activations_ != QuantizedActivations::kFp8;
  }

  void linear_quantized(const Tensor& x, const Weight& w, const Tensor& bias,
                        Tensor& out) override {
    check_quantized_layout(w);
    if (!w.perm.empty()) {  // act-order permuted at load: x gathered by perm, then plain groups
      SYV_CHECK(x.dtype == DType::BF16 && last_dim(x) == w.k)
          << "linear: " << w.describe() << " takes bf16 x of K " << w.k;
      const int64_t T = rows_of(x);
      grow_scratch(perm_x_, perm_x_bytes_, T * w.k * 2, "act-order input scratch");
      cuda::launch_gather_columns(x.data, w.perm.as<int32_t>(), T, w.k, perm_x_, stream_);
      Weight plain = w;
      plain.perm = Tensor();
      linear_quantized(Tensor(perm_x_, DType::BF16, {T, w.k}), plain, bias, out);
      return;
    }
    const int64_t K = w.k, N = w.n, T = rows_of(x);
    SYV_CHECK(last_dim(x) == K) << "linear: " << w.describe() << " [" << N << ", " << K
                                << "] vs x [.., " << last_dim(x) << "]";
    SYV_CHECK_EQ(out.numel(), T * N) << "linear: out must be [T, N]";
    if (T == 0 || N == 0) return;
    const cuda::QuantWeight q = quant_weight(w);
    auto tensor_core_gemm = [&] {
      if (!takes_quant_gemm(T, x)) return false;
      // The K splits' workspace: what the scratch holds (the split rule fits its splits to it),
      // grown only for a weight not announced at load (tests).
      ensure_dequant(std::min(N * K * 2, dequant_row_chunk_cap_));
      const bool ran = cuda::launch_quant_gemm_mma(q, x.data, out.data, out.dtype, T, sm_count_,
                                                   dequant_, dequant_bytes_, stream_);
      if (ran) ++quant_calls_.gemm;
      return ran;
    };
    // The GEMM before the fp8 GEMM for int4 at few tokens (kQuantGemmBeforeW4A8MaxTokens): faster
    // there than W4A8; for fp8 weights where quant_gemm_before_fp8() says so.
    const bool gemm_first =
        (q.kind == cuda::QuantKind::kInt4Group && T <= kQuantGemmBeforeW4A8MaxTokens) ||
        quant_gemm_before_fp8(T, q, out.dtype);
    bool done = false;
    // fp8 weights past the GEMVs' share: the tensor-core GEMM first where gemm_first says so,
    // then the fp8 GEMM, then (both refusing) the GEMV below.
    const bool fp8_past_gemv = takes_quant_gemv(T, x) && fp8_gemm_before_gemv(T, x, q);
    if (fp8_past_gemv) {
      if (gemm_first) done = tensor_core_gemm();
      if (!done) done = linear_fp8(x, q, T, out);
    }
    if (!done && takes_quant_gemv(T, x)) {
      if (quant_gemv_mma_)
        done = cuda::launch_quant_gemv_mma(q, x.data, out.data, out.dtype, T, stream_);
      if (!done) done = cuda::launch_quant_gemv(q, x.data, out.data, out.dtype, T, stream_);
    }
    if (!done && gemm_first && !fp8_past_gemv) done = tensor_core_gemm();
    if (!done) done = linear_fp8(x, q, T, out);
    if (!done && !gemm_first) done = tensor_core_gemm();
    if (!done) {
      if (N * K * 2 <= std::max<int64_t>(dequant_bytes_, dequant_row_chunk_cap_)) {
        ensure_dequant(N * K * 2);  // (announced at load; grown only for a weight that was not)
        quant_calls_.dequant_vectorized +=
            cuda::launch_quant_dequant(q, dequant_, stream_, quant_dequant_vec_);
        linear(x, Tensor(dequant_, DType::BF16, {N, K}), Tensor(), out);
      } else {
        linear_dequantized_in_row_chunks(x, q, out);
      }
    }
    if (!bias.empty()) {
      SYV_CHECK_EQ(bias.numel(), N) << "linear: bias size";
      cuda::launch_bias_add(out.data, out.dtype, bias.data, bias.dtype, T, N, stream_);
    }
  }

  // The dequantize path of a weight larger than the scratch (one announced with row chunks): rows
  // [n0, n0 + R) of the weight dequantized into the scratch, R a multiple of 128 (and of fp8's
  // scale tile rows). Where linear() would run cuBLASLt's GEMM (not batch-invariant, past the
  // GEMV's tokens) and it has an algorithm for the chunks' shapes, each chunk's GEMM writes its
  // columns of out in place (ldc N) and the weight's rows take the whole scratch; otherwise the
  // weight's part takes at most half, and for tokens [t0, t0 + Tc) linear() writes into the other
  // part, copied into out's columns [n0, n0 + R). Each output element is the same dot product as
  // unchunked.
  void linear_dequantized_in_row_chunks(const Tensor& x, const cuda::QuantWeight& q, Tensor& out) {
    const int64_t N = q.n, K = q.k, T = rows_of(x);
    const size_t osz = dtype_size(out.dtype);
    const bool fp8 = q.kind == cuda::QuantKind::kFp8Block;
    const int64_t align = fp8 && q.block_n < N ? std::lcm<int64_t>(128, q.block_n) : 128;
    auto aligned = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
    const int64_t row_bytes = fp8 ? K : K / 2;  // packed data of one weight row
    auto dequantize_rows = [&](int64_t n0, int64_t rows, void* dst) {
      cuda::QuantWeight part = q;
      part.n = rows;
      part.data = static_cast<const uint8_t*>(q.data) + n0 * row_bytes;
      part.scales = q.scales + (fp8 ? n0 / q.block_n : n0) * q.scale_cols;
      if (q.zeros != nullptr) part.zeros = q.zeros + n0 * q.scale_cols;
      quant_calls_.dequant_vectorized +=
          cuda::launch_quant_dequant(part, dst, stream_, quant_dequant_vec_);
    };
    const int64_t budget = std::max<int64_t>(dequant_bytes_, dequant_row_chunk_cap_);
    // As few chunks as the scratch allows, their rows as even as `align` lets them be (the largest
    // first measured slower: the 27B's 2K prefill 14.4-14.6 ms against 14.2-14.3 on an H100).
    const int64_t most_rows =
        std::min(N, std::max<int64_t>(align, budget / (K * 2) / align * align));
    const int64_t chunks = (N + most_rows - 1) / most_rows;
    const int64_t rows_in_place =
        std::min(N, ((N + chunks - 1) / chunks + align - 1) / align * align);
    const int64_t last_in_place = N - (N - 1) / rows_in_place * rows_in_place;
    if (!batch_invariant_ && T > gemv_max_tokens_ && x.dtype == DType::BF16 &&
        gemm_.runs(T, rows_in_place, K, out.dtype, N) &&
        gemm_.runs(T, last_in_place, K, out.dtype, N)) {
      ensure_dequant(rows_in_place * K * 2);  // (grown only for a weight not announced at load)
      for (int64_t n0 = 0; n0 < N; n0 += rows_in_place) {
        const int64_t rows = std::min(rows_in_place, N - n0);
        dequantize_rows(n0, rows, dequant_);
        SYV_CHECK(gemm_.run(x.data, dequant_, static_cast<uint8_t*>(out.data) + n0 * osz, out.dtype,
                            T, rows, K, stream_, N))
            << "cuBLASLt refused a GEMM shape it planned";
      }
      ++quant_calls_.dequant_row_chunks;
      ++quant_calls_.dequant_rows_in_place;
      return;
    }
    int64_t R = std::max<int64_t>(align, budget / 2 / (K * 2) / align * align);
    R = std::min(R, N);
    // At least 8 tokens a chunk (all of them when fewer): grown only for a weight not announced.
    const int64_t min_tokens = std::min<int64_t>(T, 8);
    const int64_t need = aligned(R * K * 2) + R * static_cast<int64_t>(osz) * min_tokens;
    if (need > static_cast<int64_t>(dequant_bytes_)) ensure_dequant(need);
    const auto room = static_cast<int64_t>(dequant_bytes_);
    auto* w_part = static_cast<uint8_t*>(dequant_);
    uint8_t* out_part = w_part + aligned(R * K * 2);
    const int64_t Tc = std::min<int64_t>(T, (room - aligned(R * K * 2)) / (R * osz));
    for (int64_t n0 = 0; n0 < N; n0 += R) {
      const int64_t rows = std::min(R, N - n0);
      dequantize_rows(n0, rows, w_part);
      const Tensor w_rows(w_part, DType::BF16, {rows, K});
      for (int64_t t0 = 0; t0 < T; t0 += Tc) {
        const int64_t tokens = std::min(Tc, T - t0);
        const Tensor x_rows(static_cast<uint8_t*>(x.data) + t0 * K * dtype_size(x.dtype), x.dtype,
                            {tokens, K});
        Tensor o(out_part, out.dtype, {tokens, rows});
        linear(x_rows, w_rows, Tensor(), o);
        SYV_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<uint8_t*>(out.data) + (t0 * N + n0) * osz,
                                         N * osz, out_part, rows * osz, rows * osz, tokens,
                                         cudaMemcpyDeviceToDevice, stream_));
      }
    }
    ++quant_calls_.dequant_row_chunks;
  }

  Status set_quantized_activations(QuantizedActivations mode) override {
    if (mode == QuantizedActivations::kFp8 && !fp8_gemm_) {
      return Status::Error(
          "fp8 activations (W4A8) need cuBLASLt's block-scaled fp8 GEMMs, which run on compute "
          "capability 9.x (Hopper); " +
          device_name_ + " is not one. Use --quantized-activations auto or off");
    }
    quantized_activations_ = mode;
    return Status::Ok();
  }

  static int64_t aligned256(int64_t bytes) { return (bytes + 255) / 256 * 256; }
  // Whether linear_fp8()'s row chunks of at most `rows` tokens (min(T, the chunk's rows)) times fp8
  // weight q run on fp8_skinny_gemm.cu's kernel (set_fp8_skinny_max_tokens) rather than
  // cuBLASLt's.
  bool fp8_skinny_takes(int64_t rows, const cuda::QuantWeight& q, DType out_t) const {
    return q.kind == cuda::QuantKind::kFp8Block && rows <= fp8_skinny_max_tokens_ &&
           (out_t == DType::BF16 || out_t == DType::F32) && cuda::fp8_skinny_supports(q, rows);
  }
  // The scratch's head that linear_fp8() gives int4 weight q's e4m3 form and scales (W4A8); 0 for
  // fp8 weights.
  static int64_t fp8_weight_bytes(const cuda::QuantWeight& q) {
    return q.kind == cuda::QuantKind::kInt4Group
               ? aligned256(q.n * q.k) + aligned256(q.k / 128 * q.n * 4)
               : 0;
  }
  // linear_fp8()'s row chunk for T tokens times q into out_t rows (after its ensure_dequant): a
  // multiple of 8 (cuBLASLt's block-scaled kernels take no other token counts), each chunk needing
  // its e4m3 rows, their scales and, for a last chunk padded to 8, its output rows before they are
  // copied out; the chunks as even as the multiple of 8 allows. 0 where not even 8 rows fit.
  int64_t fp8_chunk_rows(int64_t T, const cuda::QuantWeight& q, DType out_t) const {
    const int64_t K = q.k, G = K / 128;
    const int64_t out_row = q.n * static_cast<int64_t>(dtype_size(out_t));
    const int64_t room = static_cast<int64_t>(dequant_bytes_) - fp8_weight_bytes(q) - 3 * 256;
    const int64_t max_rows = room / (K + G * 4 + out_row) / 8 * 8;
    if (max_rows < 8) return 0;
    const int64_t chunks = (T + max_rows - 1) / max_rows;
    return std::min(max_rows, ((T + chunks - 1) / chunks + 7) / 8 * 8);
  }

  // The fp8 tensor-core path of linear_quantized() (docs/cuda-backend.md "fp8 tensor-core
  // GEMMs"): fp8 128 x 128 block weights as they are (W8A8), int4 weights of 128-column groups
  // re-expressed in e4m3 first (W4A8, kFp8 only); the activations quantized per (token, 128
  // columns). Everything lives in the dequantization scratch (the int4 weight's e4m3 form, then
  // the activations in row chunks that fit the rest), so the path needs no memory of its own.
  // Returns false, having run nothing, where it does not apply.
  bool linear_fp8(const Tensor& x, const cuda::QuantWeight& q, int64_t T, Tensor& out) {
    using cuda::LtGemm;
    if (!fp8_gemm_takes(x, q)) return false;
    const bool int4 = q.kind == cuda::QuantKind::kInt4Group;
    const int64_t K = q.k, N = q.n, G = K / 128;
    const auto kind = int4 ? LtGemm::Fp8WeightScales::kRow128 : LtGemm::Fp8WeightScales::kTile128;
    ensure_dequant(std::min(N * K * 2, dequant_row_chunk_cap_));  // (the room is checked below)
    auto round8 = [](int64_t rows) { return (rows + 7) / 8 * 8; };
    auto* base = static_cast<uint8_t*>(dequant_);
    const int64_t weight_bytes = fp8_weight_bytes(q);
    const int64_t out_row = N * static_cast<int64_t>(dtype_size(out.dtype));
    const int64_t rows = fp8_chunk_rows(T, q, out.dtype);
    if (rows == 0) return false;
    const int64_t last = T - (T - 1) / rows * rows;
    // Every chunk then (last <= rows).
    const bool skinny = !int4 && fp8_skinny_takes(std::min(T, rows), q, out.dtype);
    if (!skinny && (!gemm_.fp8_runs(rows, N, K, out.dtype, kind) ||
                    (round8(last) != rows && !gemm_.fp8_runs(round8(last), N, K, out.dtype, kind))))
      return false;
    const void* w8 = q.data;
    const float* w_scales = q.scales;
    if (int4) {
      auto* w_scales_fp8 = reinterpret_cast<float*>(base + aligned256(N * K));
      cuda::launch_int4_to_fp8(q, base, w_scales_fp8, stream_);
      w8 = base;
      w_scales = w_scales_fp8;
    }
    uint8_t* x8 = base + weight_bytes;
    auto* x_scales = reinterpret_cast<float*>(x8 + aligned256(rows * K));
    uint8_t* padded_out = x8 + aligned256(rows * K) + aligned256(G * rows * 4);
    // add_rmsnorm_quantized() wrote x's e4m3 form there already (one chunk: rows >= T).
    const bool staged = !int4 && fp8_staged_.x == x.data && fp8_staged_.tokens == T &&
                        fp8_staged_.k == K && fp8_staged_.rows == rows && rows >= T;
    if (staged) ++quant_calls_.fp8_norm_fused;
    for (int64_t t0 = 0; t0 < T; t0 += rows) {
      const int64_t r = std::min(rows, T - t0), rp = round8(r);
      uint8_t* dst = static_cast<uint8_t*>(out.data) + t0 * out_row;
      if (!staged)
        cuda::launch_quantize_fp8_groups(static_cast<const uint8_t*>(x.data) + t0 * K * 2, x8,
                                         x_scales, r, rp, K, stream_);
      if (skinny) {  // no padded rows: straight into out
        SYV_CHECK(cuda::launch_fp8_skinny_gemm(q, x8, x_scales, rp, dst, out.dtype, r, sm_count_,
                                               stream_))
            << "fp8 skinny GEMM refused a shape it announced";
        ++quant_calls_.fp8_skinny;
        continue;
      }
      gemm_.run_fp8(x8, x_scales, w8, w_scales, kind, rp == r ? dst : padded_out, out.dtype, rp, N,
                    K, stream_);
      if (rp != r) {
        SYV_CUDA_CHECK(cudaMemcpyAsync(dst, padded_out, static_cast<size_t>(r * out_row),
                                       cudaMemcpyDeviceToDevice, stream_));
      }
    }
    if (!fp8_gemm_logged_[int4]) {
      fp8_gemm_logged_[int4] = true;
      // From how many tokens on: the GEMVs' limit (fp8: kFp8GemvMaxTokens), int4 past the
      // W4A16 GEMM's share too (kQuantGemmBeforeW4A8MaxTokens).
      const int from =
          int4 ? std::max(quant_gemv_max_tokens_,
                          std::min<int>(kQuantGemmBeforeW4A8MaxTokens, quant_gemm_max_tokens_))
               : std::min(quant_gemv_max_tokens_, fp8_gemv_max_tokens_);
      SYV_LOG(INFO)
          << (int4 ? "int4 weights: GEMMs over " : "fp8 weights: GEMMs over ") << from
          << " tokens run on fp8 tensor cores (" << (int4 ? "W4A8" : "W8A8")
          << ": activations scaled to e4m3 per token and 128 columns"
          << (int4 || quant_gemm_before_fp8_max_tokens_ <= from ||
                      fp8_skinny_max_tokens_ >= quant_gemm_before_fp8_max_tokens_
                  ? ""
                  : "; up to " + std::to_string(quant_gemm_before_fp8_max_tokens_) +
                        " tokens the W8A16 tensor-core GEMM first for weights of at most " +
                        std::to_string(128 * (sm_count_ - 1)) + " rows where cuBLASLt's would run")
          << (int4 || fp8_skinny_max_tokens_ <= from
                  ? ""
                  : "; up to " + std::to_string(fp8_skinny_max_tokens_) +
                        " tokens on syv's own kernel, K split over the SMs")
          << "); --quantized-activations off keeps them bf16";
    }
    ++quant_calls_.fp8_gemm;
    return true;
  }

  // ---- batch-invariant mode (backend.h; docs/cuda-backend.md "Batch invariance") -------------
  // linear(): at every T one cuBLASLt algorithm per shape without split-K or a reduction scheme
  // (LtGemm::run_fixed; rows measured bit-identical for T = 1 .. 2048), or gemm_invariant.cu
  // (invariant by construction, slower) where that has no algorithm or SYV_INVARIANT_GEMM=mma;
  // no GEMV: the fused GEMV paths are off too (all gated by gemv_max_tokens_, 0 here).
  // paged_attention(): every token, prefill or decode, through the split-KV decode kernel with
  // kInvariantKeysPerSplit keys per split counted from key 0, so a token's splits depend on its
  // own position only (empty trailing splits add nothing; the merge sums splits in index order);
  // launched in token chunks when the partials would pass kInvariantScratchBytes.
  // The other ops are per row already: norms (a block per row), RoPE and K/V writes (a warp per
  // head), SiLU and adds (elementwise), gathers, argmax and sampling (a block per row).
  void set_batch_invariant(bool on) override {
    if (on == batch_invariant_) return;
    batch_invariant_ = on;
    std::swap(gemv_max_tokens_, saved_gemv_max_tokens_);
  }
  bool batch_invariant() const override { return batch_invariant_; }

  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    const int64_t I = last_dim(out), T = rows_of(out);
    SYV_CHECK_EQ(gate_up.numel(), 2 * T * I) << "silu_mul: gate_up must be [T, 2I]";
    cuda::launch_silu_mul(gate_up.data, gate_up.dtype, out.data, out.dtype, T, I, stream_);
  }

  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    SYV_CHECK(a.numel() == b.numel() && a.numel() == out.numel()) << "add: shapes differ";
    cuda::launch_add(a.data, a.dtype, b.data, b.dtype, out.data, out.dtype, a.numel(), stream_);
  }

  void qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_norm, const Tensor& k_norm, float eps,
                    NormKind kind, const RopeParams& rope, const BatchMeta& meta) override {
    const int64_t T = meta.positions.numel();
    if (T == 0) return;
    const bool one_plus = kind == NormKind::kOnePlus;
    const int64_t D = last_dim(q);
    SYV_CHECK_EQ(last_dim(k), D) << "qk_norm_rope: head dims";
    SYV_CHECK_EQ(q.numel() % (T * D), 0) << "qk_norm_rope: q shape";
    const int32_t* pos = meta.positions.as<int32_t>();
    const void* qn = q_norm.empty() ? nullptr : q_norm.data;
    const void* kn = k_norm.empty() ? nullptr : k_norm.data;
    const int64_t hq = q.numel() / (T * D), hk = k.numel() / (T * D);
    if (q.dtype == k.dtype && (qn == nullptr || kn == nullptr || q_norm.dtype == k_norm.dtype)) {
      cuda::launch_head_norm_rope(q.data, hq, qn, k.data, hk, kn, q.dtype, T, D,
                                  qn ? q_norm.dtype : k_norm.dtype, eps, one_plus, pos, rope.theta,
                                  rope.rotary_dim, stream_);
    } else {
      cuda::launch_head_norm_rope(q.data, hq, qn, nullptr, 0, nullptr, q.dtype, T, D, q_norm.dtype,
                                  eps, one_plus, pos, rope.theta, rope.rotary_dim, stream_);
      cuda::launch_head_norm_rope(k.data, hk, kn, nullptr, 0, nullptr, k.dtype, T, D, k_norm.dtype,
                                  eps, one_plus, pos, rope.theta, rope.rotary_dim, stream_);
    }
  }

  void kv_write(const Tensor& k, const Tensor& v, Tensor& k_cache, Tensor& v_cache,
                const BatchMeta& meta) override {
    const int64_t T = meta.slot_mapping.numel();
    SYV_CHECK_EQ(k.numel(), v.numel()) << "kv_write: k vs v";
    SYV_CHECK(k_cache.dtype == v_cache.dtype) << "kv_write: cache dtypes";
    if (T == 0) return;
    const int64_t row = k.numel() / T;
    SYV_CHECK_EQ(row, dim_from_end(k_cache, 2) * last_dim(k_cache)) << "kv_write: Hk*D vs cache";
    cuda::launch_kv_write(k.data, v.data, k.dtype, k_cache.data, v_cache.data, k_cache.dtype,
                          meta.slot_mapping.as<int32_t>(), T, row, stream_);
  }

  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, float scale,
                       const BatchMeta& meta, Tensor& out) override {
    KvCacheView cache;
    cache.k = k_cache;
    cache.v = v_cache;
    cache.dtype = k_cache.dtype;
    attend(q, cache, scale, meta, out);
  }

  // ---- quantized KV caches (backend/kv_cache_view.h; docs/cuda-backend.md "Quantized KV cache")
  // fp8 and int4: the writes quantize in the kernel (rope_kv.cu), attention reads the bytes and
  // applies the scales in registers (attention_decode.cu, attention_prefill_mma.cu).
  bool supports_kv_dtype(DType t) const override {
    return t == activation_dtype() || quantized_kv_kernels(t);
  }
  // The quantized-KV attention kernels are instantiated for head_dim 64, 128 and 256.
  bool supports_kv_head_dim(DType t, int64_t head_dim) const override {
    return !quantized_kv_kernels(t) || head_dim == 64 || head_dim == 128 || head_dim == 256;
  }
  void kv_write_quantized(const Tensor& k, const Tensor& v, const KvCacheView& cache,
                          const BatchMeta& meta) override {
    check_quantized_kv("kv_write", cache);
    const int64_t T = meta.slot_mapping.numel();
    SYV_CHECK_EQ(k.numel(), v.numel()) << "kv_write: k vs v";
    SYV_CHECK(k.dtype == v.dtype) << "kv_write: k vs v dtype";
    if (T == 0) return;
    const int64_t hk = cache.num_kv_heads(), D = cache.head_dim();
    SYV_CHECK_EQ(k.numel(), T * hk * D) << "kv_write: k [T, Hk, D] with Hk, D of the cache";
    cuda::launch_kv_write_quantized(k.data, v.data, k.dtype, kv_dev(cache),
                                    meta.slot_mapping.as<int32_t>(), T, hk, D, stream_);
  }
  void paged_attention_quantized(const Tensor& q, const KvCacheView& cache, float scale,
                                 const BatchMeta& meta, Tensor& out) override {
    check_quantized_kv("paged_attention", cache);
    const int64_t D = cache.head_dim();
    SYV_CHECK(D == 64 || D == 128 || D == 256)
        << "backend cuda paged_attention: a " << dtype_name(cache.dtype)
        << " KV cache needs head_dim 64, 128 or 256, not " << D;
    attend(q, cache, scale, meta, out);
  }
  void qkv_norm_rope_write_quantized(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                     float eps, NormKind kind, const RopeParams& rope,
                                     const BatchMeta& meta, Tensor& q, Tensor& k, Tensor& v,
                                     const KvCacheView& cache) override {
    check_quantized_kv("qkv_norm_rope_write", cache);
    const int64_t T = meta.positions.numel();
    if (T == 0) return;
    const int64_t D = cache.head_dim(), hk = cache.num_kv_heads(), hq = q.numel() / (T * D);
    check_qkv_shapes(qkv, q, k, v, T, hq, hk, D);
    const bool same_t = qkv.dtype == q.dtype && qkv.dtype == k.dtype && qkv.dtype == v.dtype;
    if (!same_t || (!q_norm.empty() && !k_norm.empty() && q_norm.dtype != k_norm.dtype)) {
      Backend::qkv_norm_rope_write_quantized(qkv, q_norm, k_norm, eps, kind, rope, meta, q, k, v,
                                             cache);
      return;
    }
    fused_qkv_norm_rope_write(qkv, q_norm, k_norm, eps, kind, rope, meta, q, k, v, hq, hk, D,
                              kv_dev(cache));
  }

  // The attention of paged_attention() on a float or quantized cache.
  void attend(const Tensor& q, const KvCacheView& cache, float scale, const BatchMeta& meta,
              Tensor& out) {
    if (batch_invariant_ && invariant_attention_in_chunks(q, cache, scale, meta, out)) return;
    const Tensor& k_cache = cache.k;
    cuda::AttentionArgs a{};
    a.q = q.data;
    a.k_cache = k_cache.data;
    a.v_cache = cache.v.data;
    a.out = out.data;
    a.q_t = q.dtype;
    a.cache_t = k_cache.dtype;
    a.out_t = out.dtype;
    a.k_scales = cache.k_scales.empty() ? nullptr : cache.k_scales.data;
    a.v_scales = cache.v_scales.empty() ? nullptr : cache.v_scales.data;
    a.tokens = static_cast<int32_t>(meta.positions.numel());
    a.head_dim = static_cast<int32_t>(cache_head_dim(cache));
    a.hk = static_cast<int32_t>(dim_from_end(k_cache, 2));
    a.hq = a.tokens ? static_cast<int32_t>(q.numel() / (int64_t{a.tokens} * a.head_dim)) : 0;
    a.page_size = meta.page_size;
    a.max_pages_per_seq = static_cast<int32_t>(last_dim(meta.page_table));
    a.cache_pages = k_cache.dim(0);
    a.scale = scale;
    a.positions = meta.positions.as<int32_t>();
    a.token_seq = meta.token_seq.as<int32_t>();
    a.seq_starts = meta.seq_starts.as<int32_t>();
    a.page_table = meta.page_table.as<int32_t>();
    if (a.tokens == 0) return;
    SYV_CHECK(a.hk > 0 && a.hq % a.hk == 0) << "paged_attention: Hq " << a.hq << " Hk " << a.hk;
    SYV_CHECK_EQ(k_cache.dim(1), meta.page_size) << "paged_attention: cache page size";
    if (!batch_invariant_ && meta.max_seq_len > kDecodeMaxSeqLen &&
        cuda::launch_attention_prefill(a, tiles_dev_, num_tiles_, stream_))
      return;
    // Default: the split count follows the batch shape only and each block finds its own key
    // range from its token's context on the device, so a captured graph serves every context.
    // Batch-invariant mode: kInvariantKeysPerSplit keys per split from key 0, as many splits as
    // the longest context needs (the fixed context while graphs are in use).
    int64_t splits = 0, per_split = 0;
    if (batch_invariant_) {
      int64_t keys = std::max<int64_t>(meta.max_context_len, 1);
      if (fixed_max_context_ > 0) keys = fixed_max_context_;
      per_split = kInvariantKeysPerSplit;
      splits = (keys + per_split - 1) / per_split;
    } else {
      splits =
          cuda::decode_attention_splits(a.tokens, a.hq, a.hk, a.head_dim, a.cache_t, sm_count_);
    }
    const int group = a.hq / a.hk;
    const int g = (group == 2 || group == 4 || group == 8) ? group : 1;
    const int64_t blocks_per_split = int64_t{a.tokens} * (a.hq / g);
    if (splits > 1) ensure_partial(int64_t{a.tokens} * a.hq * splits * (a.head_dim + 2) * 4);
    // Arrival counters let the last split block of each (token, head group) merge the splits.
    unsigned* counters = blocks_per_split <= kCounterSlots ? counters_ : nullptr;
    cuda::launch_attention_decode(a, static_cast<int32_t>(splits), static_cast<int32_t>(per_split),
                                  static_cast<float*>(partial_), counters, stream_);
  }

  // ---- fused ops (backend.h): one launch each where the kernels allow, else the sequence --------
  void qkv_norm_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                           NormKind kind, const RopeParams& rope, const BatchMeta& meta, Tensor& q,
                           Tensor& k, Tensor& v, Tensor& k_cache, Tensor& v_cache) override {
    const int64_t T = meta.positions.numel();
    if (T == 0) return;
    const int64_t D = last_dim(k_cache), hk = dim_from_end(k_cache, 2), hq = q.numel() / (T * D);
    check_qkv_shapes(qkv, q, k, v, T, hq, hk, D);
    SYV_CHECK(k_cache.dtype == v_cache.dtype) << "qkv_norm_rope_write: cache dtypes";
    const bool same_t = qkv.dtype == q.dtype && qkv.dtype == k.dtype && qkv.dtype == v.dtype;
    if (!same_t || (!q_norm.empty() && !k_norm.empty() && q_norm.dtype != k_norm.dtype)) {
      Backend::qkv_norm_rope_write(qkv, q_norm, k_norm, eps, kind, rope, meta, q, k, v, k_cache,
                                   v_cache);
      return;
    }
    cuda::KvCacheDev dev;
    dev.k = k_cache.data;
    dev.v = v_cache.data;
    dev.dtype = k_cache.dtype;
    fused_qkv_norm_rope_write(qkv, q_norm, k_norm, eps, kind, rope, meta, q, k, v, hq, hk, D, dev);
  }
  static void check_qkv_shapes(const Tensor& qkv, const Tensor& q, const Tensor& k, const Tensor& v,
                               int64_t T, int64_t hq, int64_t hk, int64_t D) {
    SYV_CHECK(q.numel() == T * hq * D && k.numel() == T * hk * D && v.numel() == T * hk * D)
        << "qkv_norm_rope_write: q [T, Hq, D], k and v [T, Hk, D] with Hk, D of the cache";
    SYV_CHECK_EQ(qkv.numel(), T * (hq + 2 * hk) * D) << "qkv_norm_rope_write: qkv vs q, k, v";
  }
  // The one-launch qkv_norm_rope_write (float or quantized cache `dev`; shapes and dtypes
  // checked by the caller).
  void fused_qkv_norm_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                 float eps, NormKind kind, const RopeParams& rope,
                                 const BatchMeta& meta, Tensor& q, Tensor& k, Tensor& v, int64_t hq,
                                 int64_t hk, int64_t D, const cuda::KvCacheDev& dev) {
    const int64_t T = meta.positions.numel();
    cuda::launch_qkv_norm_rope_write(
        qkv.data, qkv.dtype, T, hq, hk, D, q_norm.empty() ? nullptr : q_norm.data,
        k_norm.empty() ? nullptr : k_norm.data, q_norm.empty() ? k_norm.dtype : q_norm.dtype, eps,
        kind == NormKind::kOnePlus, meta.positions.as<int32_t>(), rope.theta, rope.rotary_dim,
        q.data, k.data, v.data, dev, meta.slot_mapping.as<int32_t>(), stream_);
  }

  void add_rmsnorm_linear(const Tensor& residual, const Tensor& x, const Tensor& norm_w, float eps,
                          NormKind kind, Tensor& residual_out, Tensor& normed, const Tensor& w,
                          const Tensor& bias, Tensor& out) override {
    norm_linear(residual, x, norm_w, eps, kind, residual_out, normed, w, bias, out, nullptr);
  }

  void gated_rmsnorm_linear(const Tensor& x, const Tensor& z, const Tensor& norm_w, float eps,
                            const Tensor& w, Tensor& normed, Tensor& out) override {
    const int64_t N = w.dim(0), K = last_dim(w), D = norm_w.numel(), T = out.numel() / N;
    SYV_CHECK(x.numel() == T * K && z.numel() == x.numel() && out.numel() == T * N && D > 0 &&
              K % D == 0)
        << "gated_rmsnorm_linear: x, z [T * K / D, D], norm_w [D], w [N, K], out [T, N]";
    if (T <= gemv_max_tokens_ && all_bf16({&x, &z, &w, &out})) {
      cuda::GemvFused f;
      f.w = w.data;
      f.out = out.data;
      f.tokens = T;
      f.n = N;
      f.k = K;
      f.res_in = x.data;
      f.gate_z = z.data;
      f.group = D;
      f.norm_w = norm_w.data;
      f.norm_t = norm_w.dtype;
      f.eps = eps;
      if (cuda::launch_gemv_fused(f, stream_)) return;
    }
    Backend::gated_rmsnorm_linear(x, z, norm_w, eps, w, normed, out);
  }

  void linear_pair(const Tensor& x, const Tensor& w1, Tensor& out1, const Tensor& w2,
                   Tensor& out2) override {
    const int64_t T = rows_of(x), K = last_dim(x), N1 = w1.dim(0), N2 = w2.dim(0);
    SYV_CHECK(last_dim(w1) == K && last_dim(w2) == K && out1.numel() == T * N1 &&
              out2.numel() == T * N2)
        << "linear_pair: x [T, K], w1 [N1, K], w2 [N2, K], out1 [T, N1], out2 [T, N2]";
    if (T <= gemv_max_tokens_ && all_bf16({&x, &w1, &w2, &out1}) &&
        cuda::launch_gemv_bf16_pair(x.data, T, K, w1.data, out1.data, out1.dtype, N1, w2.data,
                                    out2.data, out2.dtype, N2, stream_))
      return;
    Backend::linear_pair(x, w1, out1, w2, out2);
  }

  void linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& gate_up, Tensor& out) override {
    const int64_t T = rows_of(x), K = last_dim(x), I = last_dim(out);
    SYV_CHECK(w.dim(0) == 2 * I && last_dim(w) == K && gate_up.numel() == T * 2 * I &&
              out.numel() == T * I)
        << "linear_silu_mul: x [T, K], w [2I, K], gate_up [T, 2I], out [T, I]";
    if (T <= gemv_max_tokens_ && all_bf16({&x, &w, &gate_up, &out})) {
      cuda::GemvFused f;
      f.x = x.data;
      f.w = w.data;
      f.out = out.data;
      f.gate_up = gate_up.data;
      f.tokens = T;
      f.n = I;
      f.k = K;
      if (cuda::launch_gemv_fused(f, stream_)) return;
    }
    Backend::linear_silu_mul(x, w, gate_up, out);
  }

  void add_rmsnorm_linear_silu_mul(const Tensor& residual, const Tensor& x, const Tensor& norm_w,
                                   float eps, NormKind kind, Tensor& residual_out, Tensor& normed,
                                   const Tensor& w, Tensor& gate_up, Tensor& out) override {
    norm_linear(residual, x, norm_w, eps, kind, residual_out, normed, w, Tensor(), gate_up, &out);
  }

  void gather_rows(const Tensor& x, const BatchMeta& meta, Tensor& out) override {
    const int64_t R = meta.logit_rows.numel();
    const int64_t row_bytes = static_cast<int64_t>(x.bytes()) / std::max<int64_t>(rows_of(x), 1);
    SYV_CHECK(x.dtype == out.dtype) << "gather_rows: dtypes";
    SYV_CHECK_EQ(out.numel(), R * last_dim(x)) << "gather_rows: out must be [R, H]";
    cuda::launch_gather_rows(x.data, x.dtype, row_bytes, meta.logit_rows.as<int32_t>(), R, out.data,
                             stream_);
  }

  // ---- hybrid ops (gated_delta.cu, hybrid_elementwise.cu, moe.cu) -----------------------------
  bool supports_hybrid_ops() const override { return true; }
  bool supports_moe_ops() const override { return true; }
  bool supports_state_dtype(DType t) const override {
    return t == DType::F32 || t == DType::BF16;  // gated_delta.cu reads and writes either
  }

  void causal_conv1d_silu(const Tensor& x, const Tensor& weight, Tensor& conv_state,
                          Tensor& save_to, const BatchMeta& meta, Tensor& out) override {
    SYV_CHECK(x.ndim == 2 && out.ndim == 2 && weight.ndim == 2 && conv_state.ndim == 3)
        << "conv1d ranks";
    const int64_t T = x.dim(0), C = x.dim(1), K = weight.dim(1);
    SYV_CHECK_EQ(weight.dim(0), C) << "conv1d weight channels";
    SYV_CHECK(conv_state.dtype == DType::F32 && conv_state.dim(1) == K - 1 &&
              conv_state.dim(2) == C)
        << "conv1d state must be f32 [slots, K - 1, C]";
    SYV_CHECK(out.dim(0) == T && out.dim(1) == C && out.dtype == x.dtype) << "conv1d out shape";
    SYV_CHECK(out.data != x.data) << "conv1d out may not alias x";
    cuda::ConvArgs a;
    a.x = x.data;
    a.weight = weight.data;
    a.weight_t = weight.dtype;
    a.state = conv_state.as<float>();
    a.out = out.data;
    a.seq_starts = meta.seq_starts.as<int32_t>();
    a.token_seq = meta.token_seq.as<int32_t>();
    a.slots = hybrid_slots(meta);
    a.tokens = static_cast<int32_t>(T);
    a.num_seqs = static_cast<int32_t>(meta.seq_starts.numel() - 1);
    a.channels = static_cast<int32_t>(C);
    a.kernel = static_cast<int32_t>(K);
    const StateSaves saves = StateSaves::of(meta, save_to);
    if (saves.count > 0) {
      SYV_CHECK(save_to.dtype == DType::F32 && save_to.ndim == 3 && save_to.dim(1) == K - 1 &&
                save_to.dim(2) == C)
          << "conv1d save_to must be f32 [checkpoints, K - 1, C]";
      a.saves = save_to.as<float>();
      a.save_starts = saves.starts;
      a.save_after = saves.after;
      a.save_dests = saves.dests;
      a.num_saves = saves.count;
    }
    cuda::launch_conv1d_silu(a, x.dtype, meta.max_seq_len, stream_);
  }

  void gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log,
                        const Tensor& dt_bias, const GdnShape& shape, Tensor& state,
                        Tensor& save_to, const BatchMeta& meta, Tensor& out) override {
    const int64_t Hk = shape.num_k_heads, Hv = shape.num_v_heads;
    SYV_CHECK(Hk > 0 && Hv > 0 && Hv % Hk == 0) << "gdn heads Hk=" << Hk << " Hv=" << Hv;
    const int64_t T = qkv.dim(0);
    SYV_CHECK_EQ(qkv.numel(), T * shape.conv_dim()) << "gdn qkv width";
    SYV_CHECK_EQ(ba.numel(), T * 2 * Hv) << "gdn ba width";
    SYV_CHECK_EQ(out.numel(), T * Hv * shape.v_head_dim) << "gdn out width";
    SYV_CHECK(qkv.dtype == out.dtype) << "gdn activation dtypes";
    SYV_CHECK(state.ndim == 4 && state.dim(1) == Hv && state.dim(2) == shape.k_head_dim &&
              state.dim(3) == shape.v_head_dim)
        << "gdn state must be [slots, Hv, dk, dv]";
    SYV_CHECK(a_log.numel() == Hv && dt_bias.numel() == Hv && a_log.dtype == dt_bias.dtype)
        << "gdn A_log / dt_bias";
    cuda::GdnArgs a;
    a.qkv = qkv.data;
    a.ba = ba.data;
    a.ba_t = ba.dtype;
    a.a_log = a_log.data;
    a.dt_bias = dt_bias.data;
    a.param_t = a_log.dtype;
    a.state = state.data;
    a.out = out.data;
    a.seq_starts = meta.seq_starts.as<int32_t>();
    a.slots = hybrid_slots(meta);
    a.num_seqs = static_cast<int32_t>(meta.seq_starts.numel() - 1);
    a.hk = static_cast<int32_t>(Hk);
    a.hv = static_cast<int32_t>(Hv);
    a.dk = shape.k_head_dim;
    a.dv = shape.v_head_dim;
    const StateSaves saves = StateSaves::of(meta, save_to);
    if (saves.count > 0) {
      SYV_CHECK(save_to.dtype == state.dtype && save_to.ndim == 4 && save_to.dim(1) == Hv &&
                save_to.dim(2) == shape.k_head_dim && save_to.dim(3) == shape.v_head_dim)
          << "gdn save_to must be [checkpoints, Hv, dk, dv] of the state's dtype";
      a.saves = save_to.data;
      a.save_starts = saves.starts;
      a.save_after = saves.after;
      a.save_dests = saves.dests;
      a.num_saves = saves.count;
    }
    if (T == 0) return;
    // Long sequences take the chunked kernel, the rest (or all, see set_gdn_chunked_from()) the
    // token-by-token one; each kernel skips the other's sequences.
    const bool chunked = !batch_invariant_ && gdn_chunked_from_ > 0 &&
                         meta.max_seq_len >= gdn_chunked_from_ && cuda::gdn_chunked_supports(a.dk);
    a.chunked_from = chunked ? gdn_chunked_from_ : 0;
    a.batch_invariant = batch_invariant_;
    cuda::launch_gdn_recurrent(a, qkv.dtype, state.dtype, stream_);
    if (a.chunked_from > 0) {
      // At least the chunk table's count (backend/gdn_chunks.h).
      SYV_CHECK(meta.host != nullptr) << "gated_delta_rule: the batch metadata has no host batch";
      const int64_t chunks = gdn_chunk_bound(*meta.host, a.chunked_from);
      if (gdn_phases_ && chunks <= gdn_phases_max_chunks(T)) {
        grow_scratch(gdn_scratch_, gdn_scratch_bytes_, cuda::gdn_phases_scratch_bytes(a, chunks),
                     "gated delta rule scratch");
        cuda::launch_gdn_phases(a, qkv.dtype, state.dtype, chunks, gdn_scratch_, stream_);
        ++gdn_phases_calls_;
      } else {
        cuda::launch_gdn_chunked(a, qkv.dtype, state.dtype, stream_);
      }
    }
  }

  void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                     Tensor& out) override {
    const int64_t D = w.numel();
    SYV_CHECK(D > 0 && x.numel() % D == 0) << "gated_rmsnorm: " << x.numel() << " % " << D;
    SYV_CHECK(z.numel() == x.numel() && out.numel() == x.numel()) << "gated_rmsnorm sizes";
    SYV_CHECK(z.dtype == x.dtype && out.dtype == x.dtype) << "gated_rmsnorm dtypes";
    cuda::launch_gated_rmsnorm(x.data, z.data, x.dtype, w.data, w.dtype, eps, out.data,
                               x.numel() / D, D, stream_);
  }

  void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) override {
    SYV_CHECK_EQ(out.numel(), x.numel()) << "sigmoid_mul out";
    SYV_CHECK(gate.dtype == x.dtype && out.dtype == x.dtype) << "sigmoid_mul dtypes";
    const int64_t T = x.ndim > 0 ? x.dim(0) : 0;
    if (T == 0) return;
    const bool broadcast = gate.numel() == T && x.numel() != T;
    SYV_CHECK(broadcast || gate.numel() == x.numel())
        << "sigmoid_mul gate must be [T, N] or [T, 1]";
    cuda::launch_sigmoid_mul(x.data, gate.data, x.dtype, out.data, x.numel(), x.numel() / T,
                             broadcast, stream_);
  }

  std::string moe_shape_unsupported(int64_t experts, int64_t top_k, int64_t hidden,
                                    int64_t inter) const override {
    if (experts > cuda::kMoeMaxExperts || top_k > 32)
      return "the CUDA MoE kernels take at most " + std::to_string(cuda::kMoeMaxExperts) +
             " experts and 32 per token (this model: " + std::to_string(experts) + " and " +
             std::to_string(top_k) + ")";
    if (hidden % 8 != 0 || inter % 8 != 0)
      return "the CUDA MoE kernels need hidden_size and moe_intermediate_size multiples of 8 (this "
             "model: " +
             std::to_string(hidden) + " and " + std::to_string(inter) + ")";
    return {};
  }

  void moe_topk(const Tensor& logits, int32_t top_k, bool renormalize, Tensor& ids,
                Tensor& weights) override {
    SYV_CHECK(logits.ndim == 2 && logits.dtype == DType::F32)
        << "moe_topk logits must be f32 [T, E]";
    const int64_t T = logits.dim(0), E = logits.dim(1);
    SYV_CHECK(top_k >= 1 && top_k <= E && top_k <= 32 && E <= cuda::kMoeMaxExperts)
        << "moe top_k " << top_k << " of " << E
        << " experts (CUDA: top_k <= 32, E <= " << cuda::kMoeMaxExperts << ")";
    SYV_CHECK(ids.dtype == DType::I32 && weights.dtype == DType::F32)
        << "moe_topk ids must be i32, weights f32";
    SYV_CHECK(ids.numel() == T * top_k && weights.numel() == T * top_k) << "moe_topk outputs";
    cuda::launch_moe_topk(logits.as<float>(), T, E, top_k, renormalize, ids.as<int32_t>(),
                          weights.as<float>(), stream_);
  }

  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                   const Tensor& down, Tensor& out) override {
    SYV_CHECK(gate_up.ndim == 3 && down.ndim == 3)
        << "moe weights must be [E, 2I, H] and [E, H, I]";
    cuda::MoeShape s;
    s.tokens = x.dim(0);
    s.hidden = last_dim(x);
    s.experts = gate_up.dim(0);
    s.inter = gate_up.dim(1) / 2;
    s.top_k = ids.numel() / std::max<int64_t>(s.tokens, 1);
    SYV_CHECK(gate_up.dim(1) == 2 * s.inter && gate_up.dim(2) == s.hidden &&
              down.dim(0) == s.experts && down.dim(1) == s.hidden && down.dim(2) == s.inter)
        << "moe weight shapes";
    SYV_CHECK(out.numel() == s.tokens * s.hidden && weights.numel() == s.tokens * s.top_k)
        << "moe out [T, H] / weights [T, k]";
    SYV_CHECK(s.top_k >= 1 && s.top_k <= 32) << "moe top_k " << s.top_k << " (CUDA: <= 32)";
    SYV_CHECK(ids.dtype == DType::I32 && weights.dtype == DType::F32)
        << "moe ids must be i32, weights f32";
    SYV_CHECK(all_bf16({&x, &gate_up, &down, &out}))
        << "CUDA moe_experts takes bf16 activations and bf16 expert weights";
    SYV_CHECK(s.hidden % 8 == 0 && s.inter % 8 == 0)
        << "CUDA moe_experts needs hidden_size and moe_intermediate_size multiples of 8 (got "
        << s.hidden << ", " << s.inter << ")";
    if (s.tokens == 0) return;
    grow_scratch(moe_scratch_, moe_scratch_bytes_, static_cast<int64_t>(cuda::moe_scratch_bytes(s)),
                 "MoE scratch");
    // Batch-invariant mode keeps the tiled path at every T (as linear() keeps the GEMV off).
    cuda::launch_moe_experts(x.data, ids.as<int32_t>(), weights.as<float>(), gate_up.data,
                             down.data, out.data, s, batch_invariant_, moe_scratch_, moe_routed_,
                             stream_);
  }

  bool keeps_moe_experts_quantized() const override { return quant_moe_; }
  bool chooses_moe_experts_quantized() const override { return !quant_moe_forced_; }
  void set_moe_experts_quantized(bool keep) override { quant_moe_ = keep; }
  bool takes_permuted_act_order() const override { return act_order_perm_; }

  // Up to cuda::kMoeGemvMaxTokens tokens outside batch-invariant mode, both parts quantized in one
  // format the quantized GEMV takes: moe_quant_gemv.cu's two grouped GEMVs, which read the routed
  // experts' packed rows only (SYV_QUANT_MOE_GEMV=0: off, for A/B). More tokens, with
  // set_quant_moe_gemm (on by default): moe_quant_gemm.cu's tiled path, the
  // routed experts' packed rows decoded in registers. Otherwise the routed experts'
  // rows dequantized to bf16 (an expert mask from ids, then one kernel per weight whose blocks of
  // unrouted experts exit at once), then the dense moe_experts() over them: memory as quantized,
  // traffic per step the routed experts' quantized bytes plus twice their bf16 bytes. gate_up's
  // rows go to dequant_ (sized at load for it), down's and the mask (or the GEMV's act rows) to
  // moe_dequant_.
  void moe_experts_quantized(const Tensor& x, const Tensor& ids, const Tensor& weights,
                             const Weight& gate_up, const Weight& down, Tensor& out) override {
    const int64_t H = last_dim(x), I = down.k;
    SYV_CHECK(H > 0 && down.n % H == 0 && I > 0)
        << "moe_experts: quantized down [" << down.n << ", " << I << "] for H " << H;
    const int64_t E = down.n / H;
    SYV_CHECK(gate_up.n == E * 2 * I && gate_up.k == H)
        << "moe_experts: quantized gate_up [" << gate_up.n << ", " << gate_up.k << "] for " << E
        << " experts of [" << 2 * I << ", " << H << "]";
    SYV_CHECK(ids.dtype == DType::I32) << "moe ids must be i32";
    SYV_CHECK((gate_up.dense() ? gate_up.tensor.dtype : DType::BF16) == DType::BF16 &&
              (down.dense() ? down.tensor.dtype : DType::BF16) == DType::BF16)
        << "CUDA moe_experts takes bf16 expert weights";
    if (rows_of(x) == 0) return;
    const int64_t T = rows_of(x), top_k = ids.numel() / T;
    if (quant_moe_gemv_ && !batch_invariant_ && T <= cuda::kMoeGemvMaxTokens && !gate_up.dense() &&
        !down.dense() && top_k >= 1 && top_k <= 32 && all_bf16({&x, &out}) &&
        weights.dtype == DType::F32) {
      check_quantized_layout(gate_up);
      check_quantized_layout(down);
      // Sized for the largest such call at once (a graph bucket captured first must not grow it).
      grow_scratch(moe_dequant_, moe_dequant_bytes_, cuda::kMoeGemvMaxTokens * 32 * I * 2,
                   "quantized MoE scratch");
      if (cuda::launch_moe_quant_gemv(x.data, ids.as<int32_t>(), weights.as<float>(),
                                      quant_weight(gate_up), quant_weight(down), out.data, T,
                                      static_cast<int>(top_k), E, moe_dequant_, moe_routed_,
                                      stream_))
        return;
    }
    if (quant_moe_gemm_ && !batch_invariant_ && !gate_up.dense() && !down.dense() && top_k >= 1 &&
        top_k <= 32 && all_bf16({&x, &out}) && weights.dtype == DType::F32) {
      check_quantized_layout(gate_up);
      check_quantized_layout(down);
      cuda::MoeShape s;
      s.tokens = T;
      s.top_k = top_k;
      s.experts = E;
      s.hidden = H;
      s.inter = I;
      grow_scratch(moe_scratch_, moe_scratch_bytes_,
                   static_cast<int64_t>(cuda::moe_scratch_bytes(s)), "MoE scratch");
      if (cuda::launch_moe_quant_gemm(x.data, ids.as<int32_t>(), weights.as<float>(),
                                      quant_weight(gate_up), quant_weight(down), out.data, s,
                                      moe_scratch_, moe_routed_, stream_)) {
        ++quant_calls_.moe_tiled;
        return;
      }
    }
    const int64_t down_bytes = (E * H * I * 2 + 255) / 256 * 256;
    grow_scratch(moe_dequant_, moe_dequant_bytes_, down_bytes + E * 4, "quantized MoE scratch");
    auto* mask = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(moe_dequant_) + down_bytes);
    cuda::launch_moe_expert_mask(ids.as<int32_t>(), ids.numel(), E, mask, stream_);
    // A part the loader kept dense (its experts' layouts differed) is used as it is.
    const void* gu = gate_up.tensor.data;
    if (!gate_up.dense()) {
      check_quantized_layout(gate_up);
      ensure_dequant(E * 2 * I * H * 2);
      quant_calls_.dequant_vectorized += cuda::launch_quant_dequant_experts(
          quant_weight(gate_up), 2 * I, E, mask, dequant_, stream_, quant_dequant_vec_);
      gu = dequant_;
    }
    const void* dn = down.tensor.data;
    if (!down.dense()) {
      check_quantized_layout(down);
      quant_calls_.dequant_vectorized += cuda::launch_quant_dequant_experts(
          quant_weight(down), H, E, mask, moe_dequant_, stream_, quant_dequant_vec_);
      dn = moe_dequant_;
    }
    moe_experts(x, ids, weights, Tensor(const_cast<void*>(gu), DType::BF16, {E, 2 * I, H}),
                Tensor(const_cast<void*>(dn), DType::BF16, {E, H, I}), out);
  }

  // Up to kMoeBlockMaxTokens tokens outside batch-invariant mode, with every weight dense bf16 and
  // expert widths multiples of 8: three launches (moe.cuh launch_moe_block(): the
  // router's GEMV with the softmax + top-k in its last block, then the routed experts' two GEMVs
  // with the shared expert and its gate folded in), the sequence's bits where its linears take
  // the GEMV. Otherwise the op sequence, which batch-invariant mode and more tokens therefore run
  // exactly as before the fusion.
  void moe_block(const Tensor& x, const MoeBlockWeights& w, int32_t top_k, bool renormalize,
                 MoeBlockBuffers& b, Tensor& out) override {
    if (!moe_block_fusable(x, w, top_k, b, out)) {
      Backend::moe_block(x, w, top_k, renormalize, b, out);
      return;
    }
    const Tensor& gate_up = w.experts_gate_up->tensor;
    cuda::MoeShape s;
    s.tokens = rows_of(x);
    s.top_k = top_k;
    s.experts = gate_up.dim(0);
    s.hidden = last_dim(x);
    s.inter = gate_up.dim(1) / 2;
    const int64_t Is = w.shared_down->tensor.dim(1);
    grow_scratch(moe_scratch_, moe_scratch_bytes_,
                 static_cast<int64_t>(cuda::moe_block_scratch_bytes(s, Is)), "MoE scratch");
    cuda::launch_moe_block(x.data, w.router->tensor.data, w.shared_gate->tensor.data, gate_up.data,
                           w.experts_down->tensor.data, w.shared_gate_up->tensor.data,
                           w.shared_down->tensor.data, Is, renormalize, b.logits.as<float>(),
                           b.ids.as<int32_t>(), b.weights.as<float>(), out.data, s, moe_scratch_,
                           moe_ticket_, moe_routed_, stream_);
  }

  // ---- CudaBackend extras ---------------------------------------------------------------------
  uint64_t moe_experts_routed() override {
    unsigned long long n = 0;
    SYV_CUDA_CHECK(cudaMemcpyAsync(&n, moe_routed_, sizeof n, cudaMemcpyDeviceToHost, stream_));
    SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return n;
  }
  int device() const override { return device_; }
  std::string device_name() const override { return device_name_; }
  int sm_count() const override { return sm_count_; }
  GpuMemoryInfo memory_info() override {
    GpuMemoryInfo m;
    SYV_CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
    return m;
  }
  size_t allocated_bytes() const override { return allocated_ + scratch_bytes_; }
  size_t peak_scratch_bytes() const override { return scratch_bytes_; }

  void argmax(const Tensor& logits, Tensor& ids) override {
    SYV_CHECK(ids.dtype == DType::I32) << "argmax: ids must be i32";
    SYV_CHECK_EQ(ids.numel(), rows_of(logits)) << "argmax: one id per row";
    cuda::launch_argmax(logits.data, logits.dtype, rows_of(logits), last_dim(logits),
                        ids.as<int32_t>(), stream_);
  }

  bool supports_sampling() const override { return true; }

  void sample(const Tensor& logits, const std::vector<SampleRow>& rows,
              const std::vector<SamplePenalty>& penalties, int32_t* host_ids,
              Tensor* processed) override {
    SYV_CHECK(logits.dtype == DType::F32 && logits.ndim == 2)
        << "sample: logits must be f32 [R, V]";
    const int64_t R = logits.dim(0), V = logits.dim(1);
    SYV_CHECK_EQ(static_cast<int64_t>(rows.size()), R) << "sample: one SampleRow per logits row";
    if (R == 0) return;
    bool any_penalty = processed != nullptr, any_random = false;
    for (const SampleRow& r : rows) {
      SYV_CHECK(r.penalty_begin >= 0 && r.penalty_begin <= r.penalty_end &&
                r.penalty_end <= static_cast<int32_t>(penalties.size()))
          << "sample: penalty range [" << r.penalty_begin << ", " << r.penalty_end << ") of "
          << penalties.size();
      SYV_CHECK(r.temperature >= 0.0f) << "sample: temperature " << r.temperature;
      any_penalty |= r.penalty_end > r.penalty_begin;
      any_random |= r.temperature != 0.0f;
    }
    // One device buffer: rows, penalties (each 16-byte aligned).
    auto align16 = [](size_t b) { return (b + 15) & ~size_t{15}; };
    const size_t rows_b = align16(rows.size() * sizeof(SampleRow));
    const size_t pen_b = align16(penalties.size() * sizeof(SamplePenalty));
    const size_t need = rows_b + pen_b;
    if (need > sample_dev_bytes_) {
      if (sample_dev_) SYV_CUDA_CHECK(cudaFree(sample_dev_));
      sample_dev_bytes_ = std::max(need * 2, size_t{1} << 16);
      SYV_CUDA_CHECK(cudaMalloc(&sample_dev_, sample_dev_bytes_));
    }
    char* d = static_cast<char*>(sample_dev_);
    auto* d_rows = reinterpret_cast<SampleRow*>(d);
    auto* d_pen = reinterpret_cast<SamplePenalty*>(d + rows_b);
    int32_t* d_ids = mapped_sample_ids(R);
    if (step_uploads_mapped_) {
      // Staged in mapped memory (the previous sample() synchronized: nothing reads it now).
      if (need > sample_in_cap_) {
        if (sample_in_host_ != nullptr) SYV_CUDA_CHECK(cudaFreeHost(sample_in_host_));
        sample_in_cap_ = std::max(need * 2, size_t{1} << 16);
        sample_in_host_ = alloc_mapped(sample_in_cap_, &sample_in_dev_);
      }
      char* h = static_cast<char*>(sample_in_host_);
      std::memcpy(h, rows.data(), rows.size() * sizeof(SampleRow));
      if (!penalties.empty())
        std::memcpy(h + rows_b, penalties.data(), penalties.size() * sizeof(SamplePenalty));
      upload_staged(d, h, sample_in_dev_, need);
    } else {
      upload(d_rows, rows.data(), rows.size() * sizeof(SampleRow));
      upload(d_pen, penalties.data(), penalties.size() * sizeof(SamplePenalty));
    }
    float* work = nullptr;
    if (processed) {
      SYV_CHECK(processed->dtype == DType::F32 && processed->numel() == R * V)
          << "sample: processed must be f32 [" << R << ", " << V << "]";
      work = processed->as<float>();
    } else if (any_penalty) {
      const size_t wb = static_cast<size_t>(R * V) * sizeof(float);
      if (wb > sample_work_bytes_) {
        if (sample_work_) SYV_CUDA_CHECK(cudaFree(sample_work_));
        sample_work_bytes_ = wb;
        SYV_CUDA_CHECK(cudaMalloc(&sample_work_, sample_work_bytes_));
      }
      work = static_cast<float*>(sample_work_);
    }
    cuda::launch_sample(logits.as<float>(), R, V, d_rows, d_pen, any_penalty, any_random, work,
                        d_ids, stream_);
    // The kernel wrote the ids into mapped host memory: no copy to wait for behind others.
    SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(host_ids, sample_ids_host_, static_cast<size_t>(R) * sizeof(int32_t));
  }
  // `bytes` (a multiple of 16) from pinned, mapped `host` (the device's address `host_dev`) to
  // device memory `dev`, in order on the compute stream: a host-to-device copy, or with
  // step_uploads_mapped_ the gather kernel reading `host` (no copy engine: a copy of a step's
  // metadata or sampling rows queued there behind a host tier load's page copies).
  void upload_staged(void* dev, const void* host, const void* host_dev, size_t bytes) {
    if (!step_uploads_mapped_) {
      SYV_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream_));
      return;
    }
    const cuda::CopySegment seg{dev, host_dev, bytes};
    SYV_CHECK(cuda::gather_copy_fits(seg)) << "upload_staged: " << bytes << " bytes unaligned";
    cuda::launch_gather_copy(&seg, 1, stream_);
  }
  // `bytes` of pinned host memory mapped into the device's address space (its device address in
  // *dev).
  static void* alloc_mapped(size_t bytes, void** dev) {
    void* p = nullptr;
    SYV_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    SYV_CUDA_CHECK(cudaHostGetDevicePointer(dev, p, 0));
    return p;
  }
  // Pinned, mapped host memory for `rows` sampled ids, which the sampling kernel writes itself
  // (through the device pointer returned). A step's ids used to come back by cudaMemcpyAsync,
  // which takes a device -> host copy engine: there it queued behind the host tier's write-ahead
  // (on the Qwen3.5-9B class shape a 1 GiB batch held one decode step ~16 ms,
  // docs/cuda-backend.md "Host tier copies").
  int32_t* mapped_sample_ids(int64_t rows) {
    const size_t need = static_cast<size_t>(rows);
    if (need > sample_ids_cap_) {
      DeviceScope on(device_);
      if (sample_ids_host_ != nullptr) {
        SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));  // no kernel still writes the old one
        SYV_CUDA_CHECK(cudaFreeHost(sample_ids_host_));
      }
      sample_ids_cap_ = std::max<size_t>(need * 2, 1024);
      void* dev = nullptr;
      sample_ids_host_ =
          static_cast<int32_t*>(alloc_mapped(sample_ids_cap_ * sizeof(int32_t), &dev));
      sample_ids_dev_ = static_cast<int32_t*>(dev);
    }
    return sample_ids_dev_;
  }

  std::vector<float> time_ms(const std::function<void()>& step, int warmup, int iters) override {
    for (int i = 0; i < warmup; ++i) step();
    std::vector<cudaEvent_t> ev(static_cast<size_t>(iters) + 1);
    for (auto& e : ev) SYV_CUDA_CHECK(cudaEventCreate(&e));
    SYV_CUDA_CHECK(cudaEventRecord(ev[0], stream_));
    for (int i = 0; i < iters; ++i) {
      step();
      SYV_CUDA_CHECK(cudaEventRecord(ev[static_cast<size_t>(i) + 1], stream_));
    }
    SYV_CUDA_CHECK(cudaEventSynchronize(ev.back()));
    std::vector<float> ms(static_cast<size_t>(iters));
    for (int i = 0; i < iters; ++i)
      SYV_CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], ev[static_cast<size_t>(i)],
                                          ev[static_cast<size_t>(i) + 1]));
    for (auto& e : ev) SYV_CUDA_CHECK(cudaEventDestroy(e));
    return ms;
  }

  double measure_copy_gbps(size_t bytes, int iters) override {
    void *a = nullptr, *b = nullptr;
    SYV_CUDA_CHECK(cudaMalloc(&a, bytes));
    SYV_CUDA_CHECK(cudaMalloc(&b, bytes));
    cuda::launch_fill_random(a, DType::BF16, static_cast<int64_t>(bytes / 2), 7, 1.f, stream_);
    auto ms = time_ms(
        [&] { SYV_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream_)); }, 3,
        iters);
    SYV_CUDA_CHECK(cudaFree(a));
    SYV_CUDA_CHECK(cudaFree(b));
    std::sort(ms.begin(), ms.end());
    return 2.0 * static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
  }

  double measure_gemm_tflops(int64_t m, int64_t n, int64_t k, int iters) override {
    void *x = nullptr, *w = nullptr, *c = nullptr;
    SYV_CUDA_CHECK(cudaMalloc(&x, static_cast<size_t>(m * k * 2)));
    SYV_CUDA_CHECK(cudaMalloc(&w, static_cast<size_t>(n * k * 2)));
    SYV_CUDA_CHECK(cudaMalloc(&c, static_cast<size_t>(m * n * 2)));
    cuda::launch_fill_random(x, DType::BF16, m * k, 11, 1.f, stream_);
    cuda::launch_fill_random(w, DType::BF16, n * k, 13, 1.f, stream_);
    bool ok = true;
    auto ms =
        time_ms([&] { ok = ok && gemm_.run(x, w, c, DType::BF16, m, n, k, stream_); }, 3, iters);
    SYV_CUDA_CHECK(cudaFree(x));
    SYV_CUDA_CHECK(cudaFree(w));
    SYV_CUDA_CHECK(cudaFree(c));
    SYV_CHECK(ok) << "cuBLASLt found no algorithm for the reference GEMM";
    std::sort(ms.begin(), ms.end());
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
           (ms[ms.size() / 2] * 1e-3) / 1e12;
  }

  bool supports_graphs() const override { return true; }
  bool asynchronous() const override { return true; }

  int capture_graph(const std::function<void()>& step) override {
    SYV_CHECK(!capturing_) << "capture_graph() inside a capture";
    // Warm-up: sizes the attention scratch, the GEMM plans and the metadata of this step.
    step();
    SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    graphs_.emplace_back();
    Graph& g = graphs_.back();
    g.bytes = std::max<size_t>(last_meta_bytes_, 16);
    g.host = alloc_mapped(g.bytes, &g.host_dev);
    SYV_CUDA_CHECK(cudaMalloc(&g.dev, g.bytes));
    scratch_bytes_ += g.bytes;
    SYV_CUDA_CHECK(cudaEventCreateWithFlags(&g.done, cudaEventDisableTiming));
    cudaGraph_t graph = nullptr;
    SYV_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    capturing_ = true;
    step();
    capturing_ = false;
    SYV_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    SYV_CUDA_CHECK(cudaGraphInstantiate(&g.exec, graph, 0));
    SYV_CUDA_CHECK(cudaGraphDestroy(graph));
    ++live_graphs_;
    return static_cast<int>(graphs_.size()) - 1;
  }

  void replay_graph(int id) override {
    Graph& g = graph(id, "replay_graph");
    if (g.prepares > 0) {
      SYV_CHECK(staged_layout_ == g.layout)
          << "replay_graph(" << id << "): the staged batch metadata has part sizes "
          << layout_string(staged_layout_) << ", the graph was captured with "
          << layout_string(g.layout) << " (tokens, positions, seq_starts, context_lens, "
          << "page_table, slot_mapping, token_seq, logit_rows, state_slots, tiles, state saves)";
      // The previous launch of this graph has finished reading its staging.
      SYV_CUDA_CHECK(cudaEventSynchronize(g.done));
      std::memcpy(g.host, staging_, staged_bytes_);
    }
    SYV_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    SYV_CUDA_CHECK(cudaEventRecord(g.done, stream_));
  }

  void destroy_graph(int id) override {
    Graph& g = graph(id, "destroy_graph");
    SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    scratch_bytes_ -= g.bytes;
    free_graph(g);
    if (--live_graphs_ == 0) {
      for (auto& [p, bytes] : retired_partials_) {
        SYV_CUDA_CHECK(cudaFree(p));
        scratch_bytes_ -= bytes;
      }
      retired_partials_.clear();
    }
  }

  // Only batch-invariant mode's split count follows a context (the default one follows the batch
  // shape alone: cuda::decode_attention_splits()).
  void set_fixed_max_context(int64_t max_context) override { fixed_max_context_ = max_context; }

  void set_gemv_variant(int variant) override { cuda::set_gemv_variant(variant); }
  void set_gdn_phases(bool on) override { gdn_phases_ = on; }
  uint64_t gdn_phases_calls() const override { return gdn_phases_calls_; }
  void set_gdn_chunked_from(int tokens) override {
    SYV_CHECK(tokens >= 0) << "gdn chunked_from " << tokens;
    gdn_chunked_from_ = tokens;
  }

  void set_gemv_max_tokens(int tokens) override {
    (batch_invariant_ ? saved_gemv_max_tokens_ : gemv_max_tokens_) = tokens;
  }
  void set_quant_gemv_max_tokens(int tokens) override {
    SYV_CHECK(tokens >= 0) << "quant gemv max tokens " << tokens;
    quant_gemv_max_tokens_ = tokens;
  }
  void set_fp8_gemv_max_tokens(int tokens) override { fp8_gemv_max_tokens_ = std::max(0, tokens); }
  void set_quant_gemm_before_fp8_max_tokens(int tokens) override {
    quant_gemm_before_fp8_max_tokens_ = std::max(0, tokens);
  }
  void set_fp8_norm_quant(bool on) override { fp8_norm_quant_ = on; }
  void set_fp8_skinny_max_tokens(int tokens) override {
    fp8_skinny_max_tokens_ =
        static_cast<int>(std::clamp<int64_t>(tokens, 0, cuda::kFp8SkinnyKernelMaxTokens));
  }
  std::string fp8_gemm_algorithm(int64_t tokens, int64_t n, int64_t k, bool int4_weights) override {
    if (tokens < 1) return "";
    if (!int4_weights && tokens <= fp8_skinny_max_tokens_ && k % 128 == 0) {
      const cuda::Fp8SkinnyPlan plan = cuda::fp8_skinny_plan(n, k, sm_count_);
      return "fp8_skinny_gemm.cu, K in " + std::to_string(plan.splits) + " splits, " +
             std::to_string(plan.stages) + " stages" +
             (plan.resident > 0 ? ", " + std::to_string((n + 127) / 128) + " clusters, " +
                                      std::to_string(plan.resident) + " resident"
                                : "");
    }
    return gemm_.fp8_algorithm((tokens + 7) / 8 * 8, n, k, DType::BF16,
                               int4_weights ? cuda::LtGemm::Fp8WeightScales::kRow128
                                            : cuda::LtGemm::Fp8WeightScales::kTile128);
  }
  void set_quant_fuse(bool on) override { quant_fuse_ = on; }
  void set_quant_dequant_vectorized(bool on) override { quant_dequant_vec_ = on; }
  void set_quant_gemm_max_tokens(int tokens) override {
    quant_gemm_max_tokens_ = std::max(0, tokens);
  }
  void set_dequant_row_chunk_cap(int64_t bytes) override {
    dequant_row_chunk_cap_ = std::max<int64_t>(bytes, 0);
  }
  QuantPathCalls quant_path_calls() const override { return quant_calls_; }
  void set_quant_moe_gemm(bool on) override { quant_moe_gemm_ = on; }
  void set_pdl(bool on) override { cuda::set_pdl_enabled(on); }
  bool pdl() const override { return cuda::pdl_enabled(); }
  void fill_random_on_allocate(uint64_t seed) override { fill_seed_ = seed; }
  void fill_random(void* data, DType dtype, int64_t n, uint64_t seed, float scale) override {
    cuda::launch_fill_random(data, dtype, n, seed, scale, stream_);
  }

  void reserve_attention_scratch(int64_t tokens, int64_t q_heads, int64_t head_dim,
                                 int64_t max_context) override {
    fixed_max_context_ = max_context;         // batch-invariant mode's split count
    int64_t splits = cuda::kMaxDecodeSplits;  // the most the default policy takes
    if (batch_invariant_)
      splits = std::max<int64_t>(
          splits, (max_context + kInvariantKeysPerSplit - 1) / kInvariantKeysPerSplit);
    ensure_partial(tokens * q_heads * splits * (head_dim + 2) * 4);
  }

 private:
  static constexpr int kDecodeMaxSeqLen = 16;  // longer chunks take the tensor-core prefill path
  static constexpr int64_t kInvariantKeysPerSplit = 256;  // batch-invariant split-KV attention
  static constexpr int64_t kInvariantScratchBytes = int64_t{256} << 20;

  // SYV_BATCH_INVARIANT=1 starts the backend in batch-invariant mode (tests, A/B runs);
  // SYV_INVARIANT_GEMM=mma takes gemm_invariant.cu for every linear() in that mode instead of the
  // fixed cuBLASLt algorithms; SYV_INVARIANT_GEMM_TILE=0|1|2 pins that kernel's tile (tests).
  void init_batch_invariant_from_env() {
    auto env = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(v ? v : "");
    };
    invariant_gemm_mma_ = env("SYV_INVARIANT_GEMM") == "mma";
    const std::string tile = env("SYV_INVARIANT_GEMM_TILE");
    if (!tile.empty()) invariant_tile_ = std::atoi(tile.c_str());
    if (env("SYV_BATCH_INVARIANT") == "1") set_batch_invariant(true);
  }

  // Batch-invariant split-KV attention needs tokens * Hq * splits * (D + 2) floats of partials;
  // beyond kInvariantScratchBytes (or the scratch already there) the tokens go in chunks, each
  // through paged_attention() on a view of the batch (a token's result does not depend on its
  // chunk). Returns false when one launch will do.
  bool invariant_attention_in_chunks(const Tensor& q, const KvCacheView& cache, float scale,
                                     const BatchMeta& meta, Tensor& out) {
    const int64_t T = meta.positions.numel(), D = cache_head_dim(cache);
    if (T == 0 || (D != 64 && D != 128 && D != 256)) return false;  // generic kernel: no partials
    int64_t keys = std::max<int64_t>(meta.max_context_len, 1);
    if (fixed_max_context_ > 0) keys = fixed_max_context_;
    const int64_t splits = (keys + kInvariantKeysPerSplit - 1) / kInvariantKeysPerSplit;
    const int64_t hq = q.numel() / (T * D);
    const int64_t per_token = hq * splits * (D + 2) * 4;
    const int64_t budget =
        std::max<int64_t>(kInvariantScratchBytes, static_cast<int64_t>(partial_bytes_));
    const int64_t chunk = std::max<int64_t>(1, budget / per_token);
    if (splits <= 1 || T <= chunk) return false;
    const int64_t q_row = static_cast<int64_t>(q.bytes()) / T;
    const int64_t o_row = static_cast<int64_t>(out.bytes()) / T;
    for (int64_t t0 = 0; t0 < T; t0 += chunk) {
      const int64_t n = std::min(chunk, T - t0);
      Tensor qc(static_cast<char*>(q.data) + t0 * q_row, q.dtype, {n, hq, D});
      Tensor oc(static_cast<char*>(out.data) + t0 * o_row, out.dtype, {n, hq, D});
      BatchMeta m = meta;
      m.positions = Tensor(meta.positions.as<int32_t>() + t0, DType::I32, {n});
      m.token_seq = Tensor(meta.token_seq.as<int32_t>() + t0, DType::I32, {n});
      attend(qc, cache, scale, m, oc);
    }
    return true;
  }
  // Elements per (token, kv head) row of a float or quantized cache (the tensors may be of any
  // rank >= 2 for a float cache, [pages, page_size, Hk, D or D / 2] for a quantized one).
  static int64_t cache_head_dim(const KvCacheView& c) {
    return c.dtype == DType::U4X2 ? 2 * last_dim(c.k) : last_dim(c.k);
  }
  // A quantized cache this backend has kernels for: fp8 or int4 pages with the scales of
  // backend/kv_cache_view.h's shapes; anything else is refused by name (refuse_kv).
  void check_quantized_kv(const char* op, const KvCacheView& c) const {
    if (!quantized_kv_kernels(c.dtype) || !c.scaled() || c.v_scales.empty()) refuse_kv(op, c);
    SYV_CHECK(c.k.ndim == 4 && c.v.dtype == c.dtype && c.v.numel() == c.k.numel())
        << "backend cuda " << op << ": " << dtype_name(c.dtype) << " K/V pages must be "
        << "[pages, page_size, Hk, D" << (c.dtype == DType::U4X2 ? " / 2" : "") << "]";
    const int64_t D = c.head_dim();
    const int64_t groups = c.dtype == DType::U4X2 ? D / kKvInt4Group : 1;
    SYV_CHECK(c.dtype != DType::U4X2 || D % kKvInt4Group == 0)
        << "backend cuda " << op << ": int4 KV needs head_dim % " << kKvInt4Group << " == 0";
    const int64_t rows = c.num_pages() * c.page_size() * c.num_kv_heads();
    const DType scale_t = kv_scale_dtype(c.dtype);
    SYV_CHECK(c.k_scales.dtype == scale_t && c.v_scales.dtype == scale_t &&
              c.k_scales.numel() == rows * groups && c.v_scales.numel() == rows * groups)
        << "backend cuda " << op << ": " << dtype_name(c.dtype) << " KV scales must be "
        << dtype_name(scale_t) << " [pages, page_size, Hk, " << groups << "]";
  }
  static cuda::KvCacheDev kv_dev(const KvCacheView& c) {
    cuda::KvCacheDev d;
    d.k = c.k.data;
    d.v = c.v.data;
    d.k_scales = c.k_scales.data;
    d.v_scales = c.v_scales.data;
    d.dtype = c.dtype;
    return d;
  }
  static constexpr int kMetaParts = 11;
  // Element count of each metadata part: token_ids, positions, seq_starts, context_lens,
  // page_table, slot_mapping, token_seq, logit_rows, state_slots, prefill tiles, state saves. Two
  // batches with the same layout stage the same bytes at the same offsets (what a graph replay
  // needs).
  using MetaLayout = std::array<int64_t, kMetaParts>;

  struct Staged {
    MetaLayout counts{}, offsets{};
    size_t bytes = 0;
    int64_t pt_rows = 0, pt_width = 0;
    int32_t max_seq_len = 0, max_context_len = 0;
  };

  // One captured step: the executable graph and the pinned staging + device copy of its batch
  // metadata (the captured upload reads `host`; replay_graph() fills it from staging_ first).
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t done = nullptr;  // recorded after each launch
    void* host = nullptr;        // pinned and mapped (alloc_mapped)
    void* host_dev = nullptr;    // the device's address of `host`
    void* dev = nullptr;
    size_t bytes = 0;
    int prepares = 0;  // prepare_batch() calls during the capture (0 or 1)
    MetaLayout layout{};
  };

  static std::string layout_string(const MetaLayout& l) {
    std::string out = "[";
    for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + std::to_string(l[i]);
    return out + "]";
  }

  Graph& graph(int id, const char* what) {
    SYV_CHECK(id >= 0 && id < static_cast<int>(graphs_.size()) &&
              graphs_[static_cast<size_t>(id)].exec != nullptr)
        << what << ": no live graph " << id << " (" << graphs_.size() << " captured)";
    return graphs_[static_cast<size_t>(id)];
  }

  static void free_graph(Graph& g) {
    if (g.exec) cudaGraphExecDestroy(g.exec);
    if (g.done) cudaEventDestroy(g.done);
    if (g.host) cudaFreeHost(g.host);
    if (g.dev) cudaFree(g.dev);
    g = Graph{};
  }

  // Derives `batch`'s metadata (host_batch_meta + prefill tiles) and writes it, packed in 16-byte
  // aligned parts, into the pinned staging: the capture's graph's own (`g`, whose size the
  // warm-up fixed), or the eager staging_ (grown as needed, after the previous upload from it).
  Staged stage(const Batch& batch, int32_t page_size, Graph* g) {
    HostBatchMeta h = build_host_batch_meta(batch, page_size);
    batch_copy_ = batch;
    const int64_t T = batch.num_tokens(), S = batch.num_seqs();
    const int64_t R = static_cast<int64_t>(batch.logit_rows.size());
    Staged st;
    st.pt_width = h.max_pages_per_seq;
    st.pt_rows = st.pt_width > 0 ? static_cast<int64_t>(h.page_table.size()) / st.pt_width : 0;
    st.max_seq_len = h.max_seq_len;
    st.max_context_len = h.max_context_len;
    // Prefill tiles: (seq, first token) of kPrefillTileRows-row query tiles, over all sequences
    // the ones that see the most keys first (the longest blocks start first).
    std::vector<std::array<int32_t, 3>> tiles;  // keys seen, seq, first token
    for (int64_t s = 0; s < S; ++s) {
      const int32_t start = batch.seq_starts[s];
      const int32_t end = start + batch.seq_len(static_cast<int32_t>(s));
      for (int32_t t0 = start; t0 < end; t0 += cuda::kPrefillTileRows) {
        const int32_t last = std::min(t0 + cuda::kPrefillTileRows, end) - 1;
        tiles.push_back({batch.positions[last] + 1, static_cast<int32_t>(s), t0});
      }
    }
    std::stable_sort(tiles.begin(), tiles.end(),
                     [](const auto& x, const auto& y) { return x[0] > y[0]; });
    tiles_host_.clear();
    for (const auto& t : tiles) {
      tiles_host_.push_back(t[1]);
      tiles_host_.push_back(t[2]);
    }
    num_tiles_ = static_cast<int32_t>(tiles_host_.size() / 2);
    const int32_t zero = 0;
    const int32_t* srcs[kMetaParts] = {batch.token_ids.data(),
                                       batch.positions.data(),
                                       batch.seq_starts.empty() ? &zero : batch.seq_starts.data(),
                                       h.context_lens.data(),
                                       h.page_table.data(),
                                       h.slot_mapping.data(),
                                       h.token_seq.data(),
                                       batch.logit_rows.data(),
                                       h.state_slots.data(),
                                       tiles_host_.data(),
                                       h.state_saves.data()};
    st.counts = {T,
                 T,
                 S + 1,
                 S,
                 static_cast<int64_t>(h.page_table.size()),
                 T,
                 T,
                 R,
                 static_cast<int64_t>(h.state_slots.size()),
                 static_cast<int64_t>(tiles_host_.size()),
                 static_cast<int64_t>(h.state_saves.size())};
    int64_t total = 0;
    for (int i = 0; i < kMetaParts; ++i) {
      st.offsets[static_cast<size_t>(i)] = total;
      total += (st.counts[static_cast<size_t>(i)] + 3) / 4 * 4;  // 16-byte aligned parts
    }
    st.bytes = static_cast<size_t>(std::max<int64_t>(total, 4)) * 4;
    void* dst = nullptr;
    if (g != nullptr) {
      SYV_CHECK_LE(st.bytes, g->bytes)
          << "CUDA graph capture: the step's batch metadata grew between warm-up and capture";
      g->layout = st.counts;
      dst = g->host;
    } else {
      SYV_CUDA_CHECK(cudaEventSynchronize(staging_done_));
      if (st.bytes > meta_capacity_) {
        SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));
        if (staging_) SYV_CUDA_CHECK(cudaFreeHost(staging_));
        if (meta_dev_) SYV_CUDA_CHECK(cudaFree(meta_dev_));
        scratch_bytes_ -= meta_capacity_;
        meta_capacity_ = std::max(st.bytes * 2, size_t{1} << 16);
        staging_ = alloc_mapped(meta_capacity_, &staging_dev_);
        SYV_CUDA_CHECK(cudaMalloc(&meta_dev_, meta_capacity_));
        scratch_bytes_ += meta_capacity_;
      }
      dst = staging_;
      staged_layout_ = st.counts;
      staged_bytes_ = st.bytes;
      last_meta_bytes_ = st.bytes;
    }
    int32_t* out = static_cast<int32_t*>(dst);
    for (int i = 0; i < kMetaParts; ++i) {
      const int64_t n = st.counts[static_cast<size_t>(i)];
      if (n > 0)
        std::memcpy(out + st.offsets[static_cast<size_t>(i)], srcs[i],
                    static_cast<size_t>(n) * sizeof(int32_t));
    }
    return st;
  }
  static constexpr int64_t kCounterSlots = 1 << 16;  // attention arrival counters (u32)
  // The constructor's scratch as backend/cuda_choices.h counts it for `syv inspect`: the cuBLASLt
  // workspace, these counters and the two MoE routing flags (a u64 and a u32).
  static_assert(static_cast<int64_t>(kGemmWorkspace) + kCounterSlots * 4 + 8 + 4 ==
                    kCudaConstructionScratchBytes,
                "backend/cuda_choices.h kCudaConstructionScratchBytes");

  // Whether moe_block() takes the fused path (see there): anything else, including shapes the op
  // sequence refuses, goes to the sequence and its checks.
  bool moe_block_fusable(const Tensor& x, const MoeBlockWeights& w, int32_t top_k,
                         const MoeBlockBuffers& b, const Tensor& out) const {
    const int64_t T = rows_of(x), H = last_dim(x);
    if (batch_invariant_ || T < 1 || T > cuda::kMoeBlockMaxTokens || H % 8 != 0) return false;
    auto dense_bf16 = [](const Weight* wt) {
      return wt != nullptr && wt->format == WeightFormat::kDense &&
             wt->tensor.dtype == DType::BF16 &&
             reinterpret_cast<uintptr_t>(wt->tensor.data) % 16 == 0;
    };
    for (const Weight* wt : {w.router, w.experts_gate_up, w.experts_down, w.shared_gate_up,
                             w.shared_down, w.shared_gate})
      if (!dense_bf16(wt)) return false;
    const Tensor &router = w.router->tensor, &gu = w.experts_gate_up->tensor;
    const Tensor &dn = w.experts_down->tensor, &sgu = w.shared_gate_up->tensor;
    const Tensor &sdn = w.shared_down->tensor, &sg = w.shared_gate->tensor;
    if (router.ndim != 2 || gu.ndim != 3 || dn.ndim != 3 || sgu.ndim != 2 || sdn.ndim != 2)
      return false;
    const int64_t E = router.dim(0), I = gu.dim(1) / 2, Is = sdn.dim(1);
    const bool shapes = router.dim(1) == H && gu.dim(0) == E && gu.dim(1) == 2 * I &&
                        gu.dim(2) == H && dn.dim(0) == E && dn.dim(1) == H && dn.dim(2) == I &&
                        sgu.dim(0) == 2 * Is && sgu.dim(1) == H && sdn.dim(0) == H &&
                        sg.numel() == H && I % 8 == 0 && Is > 0 && Is % 8 == 0;
    return shapes && E <= cuda::kMoeBlockMaxExperts && top_k >= 1 && top_k <= 32 && top_k <= E &&
           x.dtype == DType::BF16 && out.dtype == DType::BF16 && out.numel() == T * H &&
           reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && b.logits.dtype == DType::F32 &&
           b.logits.numel() == T * E && b.ids.dtype == DType::I32 && b.ids.numel() == T * top_k &&
           b.weights.dtype == DType::F32 && b.weights.numel() == T * top_k;
  }

  static bool all_bf16(std::initializer_list<const Tensor*> ts) {
    for (const Tensor* t : ts)
      if (t->dtype != DType::BF16) return false;
    return true;
  }

  // The shapes add_rmsnorm_linear's prologue needs: residual, residual_out and normed [T, H] like
  // x, residual_out of residual's dtype, norm_w [H].
  static void check_add_norm(const Tensor& residual, const Tensor& x, const Tensor& norm_w,
                             const Tensor& residual_out, const Tensor& normed) {
    const int64_t H = last_dim(x), T = rows_of(x);
    SYV_CHECK(residual.numel() == T * H && residual_out.numel() == T * H && normed.numel() == T * H)
        << "add_rmsnorm_linear: residual, residual_out and normed must be [T, H] like x";
    SYV_CHECK(residual.dtype == residual_out.dtype) << "add_rmsnorm_linear: residual dtypes";
    SYV_CHECK_EQ(norm_w.numel(), H) << "add_rmsnorm_linear: norm weight size";
  }

  // add_rmsnorm_linear (act == nullptr) and add_rmsnorm_linear_silu_mul (lin_out = gate_up):
  // one fused GEMV launch when linear() would take the GEMV path (T <= gemv_max_tokens_), else
  // the norm kernel (residual in, residual_out out: no copy) and linear() [+ silu_mul()].
  void norm_linear(const Tensor& residual, const Tensor& x, const Tensor& norm_w, float eps,
                   NormKind kind, Tensor& residual_out, Tensor& normed, const Tensor& w,
                   const Tensor& bias, Tensor& lin_out, Tensor* act) {
    check_add_norm(residual, x, norm_w, residual_out, normed);
    const int64_t H = last_dim(x), T = rows_of(x);
    SYV_CHECK_EQ(last_dim(w), H) << "add_rmsnorm_linear: w [N, H] vs x [T, H]";
    const bool one_plus = kind == NormKind::kOnePlus;
    if (T <= gemv_max_tokens_ && residual_out.data != residual.data &&
        all_bf16({&residual, &x, &residual_out, &normed, &w, &lin_out}) &&
        (act == nullptr || act->dtype == DType::BF16)) {
      cuda::GemvFused f;
      f.w = w.data;
      f.tokens = T;
      f.k = H;
      f.res_in = residual.data;
      f.add = x.data;
      f.res_out = residual_out.data;
      f.normed = normed.data;
      f.norm_w = norm_w.data;
      f.norm_t = norm_w.dtype;
      f.eps = eps;
      f.one_plus = one_plus;
      if (act != nullptr) {
        f.n = w.dim(0) / 2;
        SYV_CHECK(w.dim(0) == 2 * f.n && act->numel() == T * f.n && lin_out.numel() == T * 2 * f.n)
            << "add_rmsnorm_linear_silu_mul: w [2I, H], gate_up [T, 2I], out [T, I]";
        f.out = act->data;
        f.gate_up = lin_out.data;
      } else {
        f.n = w.dim(0);
        SYV_CHECK_EQ(lin_out.numel(), T * f.n) << "add_rmsnorm_linear: out must be [T, N]";
        f.out = lin_out.data;
      }
      if (cuda::launch_gemv_fused(f, stream_)) {
        if (!bias.empty()) {
          SYV_CHECK_EQ(bias.numel(), f.n) << "add_rmsnorm_linear: bias size";
          cuda::launch_bias_add(lin_out.data, lin_out.dtype, bias.data, bias.dtype, T, f.n,
                                stream_);
        }
        return;
      }
    }
    cuda::launch_add_rmsnorm(x.data, x.dtype, residual.data, residual_out.data, residual.dtype,
                             norm_w.data, norm_w.dtype, eps, one_plus, normed.data, normed.dtype, T,
                             H, stream_);
    linear(normed, w, bias, lin_out);
    if (act != nullptr) silu_mul(lin_out, *act);
  }

  void ensure_partial(int64_t bytes) {
    grow_scratch(partial_, partial_bytes_, bytes, "attention scratch");
  }

  // Grows a scratch buffer to `bytes` (never during a capture); an outgrown buffer that a captured
  // graph may use is kept until the last graph goes.
  void grow_scratch(void*& buf, size_t& have, int64_t bytes, const char* what) {
    if (static_cast<size_t>(bytes) <= have) return;
    SYV_CHECK(!capturing_) << "CUDA graph capture: the " << what << " grew during capture";
    SYV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (buf && live_graphs_ > 0) {
      retired_partials_.push_back({buf, have});  // captured graphs use it
    } else if (buf) {
      SYV_CUDA_CHECK(cudaFree(buf));
      scratch_bytes_ -= have;
    }
    have = static_cast<size_t>(bytes);
    SYV_CUDA_CHECK(cudaMalloc(&buf, have));
    scratch_bytes_ += have;
  }

  // The bf16 scratch a quantized weight is dequantized into (linear_quantized()): n * k * 2 bytes
  // of the largest weight, sized at load (reserve_quantized_scratch()); grown by a call only for a
  // weight the loader did not announce (tests), never during a capture; an outgrown buffer that a
  // captured graph may use is kept until the last graph goes (as the attention partials).
  void ensure_dequant(int64_t bytes) {
    grow_scratch(dequant_, dequant_bytes_, bytes, "dequantization scratch");
  }

  int device_ = 0;
  std::string device_name_;
  int sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t staging_done_ = nullptr;
  // copy_async()'s streams, indexed by CopyDir: [0] kIn (loads), [1] kOut (write-backs), [2]
  // kAhead (write-aheads); each created on first use.
  cudaStream_t copy_streams_[3] = {nullptr, nullptr, nullptr};
  cudaEvent_t compute_mark_ = nullptr;  // recorded on stream_ at each copy_async()
  // SYV_AHEAD_STREAM=out: write-aheads share the write-backs' stream (A/B: whether the kAhead
  // stream of its own gains anything, docs/cuda-backend.md "Host tier copies").
  bool ahead_on_out_stream_ = false;
  // Deferred issue (defer_copies()): enabled by default (SYV_DEFER_COPIES=0 or
  // set_defer_copies(false) turns it off); on between defer_copies() and flush_copies(); the calls
  // kept meanwhile; how many were deferred.
  bool defer_copies_enabled_ = true;
  bool deferring_ = false;
  cuda::DeferredCopies deferred_;
  uint64_t deferred_calls_ = 0;
  void* workspace_ = nullptr;
  cuda::LtGemm gemm_;
  int gemv_max_tokens_ = 4;  // 0 in batch-invariant mode: every GEMV path is gated by it
  int gdn_chunked_from_ = kGdnChunkedFrom;  // see set_gdn_chunked_from()
  bool gdn_phases_ = true;                  // see set_gdn_phases()
  uint64_t gdn_phases_calls_ = 0;           // gated_delta_rule() calls that took them
  void* gdn_scratch_ = nullptr;             // launch_gdn_phases()'s
  size_t gdn_scratch_bytes_ = 0;
  bool batch_invariant_ = false;
  int saved_gemv_max_tokens_ = 0;    // gemv_max_tokens_ of the other mode
  bool invariant_gemm_mma_ = false;  // gemm_invariant.cu instead of LtGemm::run_fixed
  int invariant_tile_ = cuda::kInvariantTileAuto;

  size_t allocated_ = 0, scratch_bytes_ = 0;
  std::vector<std::pair<void*, size_t>> sizes_;
  // The batched copy (copy_batch_async): batches of at least kGatherMinOps rows averaging at most
  // kGatherMaxMeanBytes go as one batch (a host tier page: 2 x layers rows of ~128 KiB).
  static constexpr size_t kGatherMinOps = 4;
  static constexpr size_t kGatherMaxMeanBytes = size_t{4} << 20;
  AddressRanges device_ranges_;       // allocate()d memory
  AddressRanges host_ranges_;         // pinned host memory the device addresses at its host pointer
  std::vector<void*> host_resident_;  // allocate_host_resident()'s buffers (cudaFreeHost)
  int host_pointer_mapped_ = -1;      // cudaDevAttrCanUseHostPointerForRegisteredMem; -1: not asked
  std::vector<cuda::CopySegment> segments_;  // gather_segments(): the batch's rows
  std::vector<cuda::StridedCopy> strided_;   // copy_engines_batch(): the batch's ops
  // set_batch_copy_path(): [0] loads (kIn), [1] write-backs (kOut).
  BatchCopyPath batch_copy_path_[2] = {BatchCopyPath::kCopyCalls, BatchCopyPath::kCopyCalls};
  uint64_t batched_copies_ = 0, gather_batches_ = 0;

  Batch batch_copy_;
  std::vector<int32_t> tiles_host_;
  int32_t num_tiles_ = 0;
  const int32_t* tiles_dev_ = nullptr;
  void* staging_ = nullptr;      // pinned and mapped (alloc_mapped)
  void* staging_dev_ = nullptr;  // the device's address of staging_
  void* meta_dev_ = nullptr;
  size_t meta_capacity_ = 0;

  void* partial_ = nullptr;
  unsigned* counters_ = nullptr;  // kCounterSlots, zero between launches (attention_decode.cu)
  size_t partial_bytes_ = 0;
  void* dequant_ = nullptr;  // ensure_dequant()
  size_t dequant_bytes_ = 0;
  void* moe_scratch_ = nullptr;  // moe_experts(): routing lists, activations (moe.cuh)
  size_t moe_scratch_bytes_ = 0;
  // Quantized experts kept quantized (chosen per model by prepare_model(), or forced by
  // SYV_QUANT_MOE; else the loader dequantizes them at load) and moe_experts_quantized()'s
  // scratch: the routed experts' down rows in bf16 and the expert mask, or the GEMV's act rows
  // (their gate_up rows go to dequant_).
  bool quant_moe_ = false;
  bool quant_moe_forced_ = false;  // by SYV_QUANT_MOE (else prepare_model() chooses per model)
  bool quant_moe_gemv_ = true;  // its small-batch GEMVs (SYV_QUANT_MOE_GEMV=0: the dequantize path)
  void* moe_dequant_ = nullptr;
  size_t moe_dequant_bytes_ = 0;
  // Act-order int4 permuted at load (on since its GPU run, 2026-12-05; SYV_ACT_ORDER_PERM=0: the
  // loader keeps the g_idx, which takes the dequantize path at every step) and the scratch
  // linear_quantized() gathers x into for such a weight.
  bool act_order_perm_ = true;
  void* perm_x_ = nullptr;
  size_t perm_x_bytes_ = 0;
  unsigned long long* moe_routed_ = nullptr;         // moe_experts_routed()
  unsigned* moe_ticket_ = nullptr;                   // moe_block(): 0 between launches
  int quant_gemv_max_tokens_ = kQuantGemvMaxTokens;  // set_quant_gemv_max_tokens()
  int fp8_gemv_max_tokens_ = kFp8GemvMaxTokens;      // set_fp8_gemv_max_tokens()
  int quant_gemm_before_fp8_max_tokens_ = kQuantGemmBeforeFp8MaxTokens;  // set_quant_gemm_...
  bool fp8_norm_quant_ = true;                                           // set_fp8_norm_quant()
  int fp8_skinny_max_tokens_ = kFp8SkinnyMaxTokens;  // set_fp8_skinny_max_tokens()
  // The e4m3 activations add_rmsnorm_quantized() left in the dequantization scratch for the fp8
  // GEMM it calls next: those of x (T rows of K, in a chunk of `rows`); cleared after that call.
  struct Fp8Staged {
    const void* x = nullptr;
    int64_t tokens = 0, k = 0, rows = 0;
  } fp8_staged_;
  bool quant_gemv_mma_ = true;  // the tensor-core GEMVs first (SYV_QUANT_GEMV_MMA=0: SIMT only)
  // The SiLU·mul in the tensor-core GEMV's epilogue (SYV_QUANT_FUSE=0: its own kernel).
  bool quant_fuse_ = true;
  // The dequantize path 8 columns a thread (SYV_QUANT_DEQUANT_VEC=0: one element a thread;
  // docs/cuda-backend.md "Dequantize + dense GEMM").
  bool quant_dequant_vec_ = true;
  int quant_gemm_max_tokens_ = kQuantGemmMaxTokens;  // set_quant_gemm_max_tokens()
  // The share of the dequantization scratch of a weight taken in row chunks
  // (set_dequant_row_chunk_cap).
  int64_t dequant_row_chunk_cap_ = cuda_dequant_row_chunk_cap();
  // Quantized MoE experts above kMoeGemvMaxTokens on moe_quant_gemm.cu's tiled path
  // (set_quant_moe_gemm; SYV_QUANT_MOE_GEMM=0: the dequantize path).
  bool quant_moe_gemm_ = true;
  QuantPathCalls quant_calls_;  // quant_path_calls()
  bool fp8_gemm_ = false;       // the device runs LtGemm::run_fp8 (compute capability 9.x)
  bool fp8_gemm_logged_[2] = {false, false};  // linear_fp8's first run said so (fp8, int4)
  QuantizedActivations quantized_activations_ = QuantizedActivations::kAuto;
  void* sample_dev_ = nullptr;  // sample(): rows, penalties
  size_t sample_dev_bytes_ = 0;
  int32_t* sample_ids_host_ = nullptr;  // sample(): the ids, pinned and mapped (mapped_sample_ids)
  int32_t* sample_ids_dev_ = nullptr;   // the same memory as the device addresses it
  size_t sample_ids_cap_ = 0;           // in ids
  // With step_uploads_mapped_ (SYV_STEP_UPLOADS=mapped): sample()'s rows and penalties staged in
  // mapped memory, and its device address; capacity in bytes.
  void* sample_in_host_ = nullptr;
  void* sample_in_dev_ = nullptr;
  size_t sample_in_cap_ = 0;
  bool step_uploads_mapped_ = false;
  void* sample_work_ = nullptr;  // sample(): penalised logits
  size_t sample_work_bytes_ = 0;
  int64_t fixed_max_context_ = 0;

  uint64_t fill_seed_ = 0;
  bool capturing_ = false;
  std::vector<Graph> graphs_;  // by id; destroyed ones keep their slot (exec == nullptr)
  int live_graphs_ = 0;
  // Outgrown scratch (attention partials, the dequantization buffer, the MoE scratch) that graphs
  // still use.
  std::vector<std::pair<void*, size_t>> retired_partials_;
  MetaLayout staged_layout_{};  // of the metadata in staging_ (latest stage / prepare)
  size_t staged_bytes_ = 0;
  size_t last_meta_bytes_ = 0;  // of the latest eager prepare_batch() (sizes a graph's staging)
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

size_t cuda_device_total_memory(int device) {
  size_t free_b = 0, total_b = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return total_b;
}

void cuda_profiler_range(bool start) {
  SYV_CUDA_CHECK(start ? cudaProfilerStart() : cudaProfilerStop());
}

std::unique_ptr<CudaBackend> make_cuda_backend(int device) {
  return std::make_unique<CudaBackendImpl>(device);
}

}  // namespace syv
