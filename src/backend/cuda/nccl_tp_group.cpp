#include "backend/cuda/nccl_tp_group.h"

#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"

#if SYV_HAVE_NCCL
#include <dlfcn.h>
#include <nccl.h>

#include <mutex>
#endif

namespace syv {

#if !SYV_HAVE_NCCL

bool nccl_available() {
  return false;
}

Result<std::unique_ptr<TpGroup>> make_nccl_tp_group(const std::vector<CudaBackend*>&) {
  return Status::Error(
      "tensor parallelism on CUDA needs NCCL, and this syv was built without it (CMake found no "
      "nccl.h; install NCCL, e.g. the CUDA toolkit's, and configure again)");
}

#else

namespace {

// Every NCCL function syv calls, resolved from libnccl.so.2 on first use (see the header). A
// member has the function's own name and type: `api.ncclAllReduce(...)`.
#define SYV_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)           \
  X(ncclGetErrorString)       \
  X(ncclGetLastError)         \
  X(ncclCommInitAll)          \
  X(ncclCommDestroy)          \
  X(ncclAllReduce)

struct NcclApi {
#define SYV_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  SYV_NCCL_FUNCTIONS(SYV_NCCL_MEMBER)
#undef SYV_NCCL_MEMBER
};

const char* last_dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dl error";
}

// The table, or why it cannot be had: by name first (run path, LD_LIBRARY_PATH, ld.so.cache),
// then in the folder CMake found libnccl in.
Result<const NcclApi*> nccl_api() {
  static std::once_flag once;
  static NcclApi api;
  static std::string error;
  std::call_once(once, [] {
    constexpr const char* kName = "libnccl.so.2";
    void* lib = dlopen(kName, RTLD_NOW | RTLD_LOCAL);  // kept open for the process's life
    std::string why = lib ? "" : last_dl_error();
#ifdef SYV_NCCL_LIB_DIR
    if (lib == nullptr) {
      lib = dlopen((std::string(SYV_NCCL_LIB_DIR) + "/" + kName).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) why += std::string("; ") + last_dl_error();
    }
#endif
    if (lib == nullptr) {
      error = "tensor parallelism on CUDA: cannot open NCCL (" + why + ")";
      return;
    }
#define SYV_NCCL_RESOLVE(name)                                                  \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));            \
  if (api.name == nullptr) {                                                    \
    error = std::string("NCCL: no symbol " #name " (") + last_dl_error() + ")"; \
    return;                                                                     \
  }
    SYV_NCCL_FUNCTIONS(SYV_NCCL_RESOLVE)
#undef SYV_NCCL_RESOLVE
  });
  if (!error.empty()) return Status::Error(error);
  return &api;
}

// What the table has once a group exists (make_nccl_tp_group loaded it).
const NcclApi& nccl() {
  return *nccl_api().value();
}

}  // namespace
}  // namespace syv

// Every NCCL call of the group: a failure aborts with the file, the line, the call's text and
// NCCL's message (ncclGetErrorString, and ncclGetLastError's detail when it has one).
#define SYV_NCCL_CHECK(expr)                                                                   \
  do {                                                                                         \
    ncclResult_t syv_nccl_ = (expr);                                                           \
    if (syv_nccl_ != ncclSuccess) {                                                            \
      const std::string syv_what_ = std::string(::syv::nccl().ncclGetErrorString(syv_nccl_)) + \
                                    ": " + ::syv::nccl().ncclGetLastError(nullptr);            \
      ::syv::cuda::cuda_fail(__FILE__, __LINE__, #expr, syv_what_.c_str());                    \
    }                                                                                          \
  } while (0)

namespace syv {
namespace {

Result<ncclDataType_t> nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclHalf;
    default:
      return Status::Error("NCCL all-reduce of " + std::string(dtype_name(t)) +
                           " (expected f32, bf16 or f16)");
  }
}

class NcclComm final : public TpComm {
 public:
  NcclComm(ncclComm_t comm, CudaBackend& backend, int rank, int size)
      : comm_(comm), backend_(backend), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // In place, on the rank backend's stream; capturable (no host synchronisation).
  void all_reduce_sum(Backend& backend, Tensor& t) override {
    SYV_CHECK(&backend == &backend_) << "NCCL rank " << rank_ << ": all_reduce_sum on backend "
                                     << backend.name() << ", the rank's is " << backend_.name();
    int current = -1;
    SYV_CUDA_CHECK(cudaGetDevice(&current));
    SYV_CHECK_EQ(current, backend_.device())
        << "NCCL rank " << rank_ << ": all_reduce_sum from a thread whose current device is not "
        << "the rank's (Backend::make_current() first)";
    Result<ncclDataType_t> type = nccl_type(t.dtype);
    SYV_CHECK(type.ok()) << "NCCL rank " << rank_ << ": " << type.message();
    SYV_NCCL_CHECK(nccl().ncclAllReduce(t.data, t.data, static_cast<size_t>(t.numel()), *type,
                                        ncclSum, comm_,
                                        static_cast<cudaStream_t>(backend_.cuda_stream())));
  }
  ncclComm_t handle() const { return comm_; }
  CudaBackend& backend() const { return backend_; }

 private:
  ncclComm_t comm_;
  CudaBackend& backend_;
  int rank_, size_;
};

class NcclTpGroup final : public TpGroup {
 public:
  NcclTpGroup(std::vector<std::unique_ptr<NcclComm>> comms, std::string version)
      : comms_(std::move(comms)), version_(std::move(version)) {}
  ~NcclTpGroup() override {
    for (auto& c : comms_) c->backend().synchronize();
    for (auto& c : comms_) nccl().ncclCommDestroy(c->handle());
  }
  int size() const override { return static_cast<int>(comms_.size()); }
  TpComm& comm(int rank) override {
    SYV_CHECK(rank >= 0 && rank < size()) << "NCCL group of " << size() << ": rank " << rank;
    return *comms_[static_cast<size_t>(rank)];
  }
  std::string describe() const override {
    std::string devices;
    for (const auto& c : comms_)
      devices += (devices.empty() ? "" : ", ") + std::to_string(c->backend().device());
    return "NCCL " + version_ + " over " + std::to_string(comms_.size()) + " GPUs (devices " +
           devices + ")";
  }

 private:
  std::vector<std::unique_ptr<NcclComm>> comms_;
  std::string version_;
};

}  // namespace

bool nccl_available() {
  return true;
}

Result<std::unique_ptr<TpGroup>> make_nccl_tp_group(const std::vector<CudaBackend*>& ranks) {
  if (ranks.empty()) return Status::Error("NCCL group: no ranks");
  std::vector<int> devices;
  for (const CudaBackend* b : ranks) {
    for (int d : devices) {
      if (d == b->device())
        return Status::Error("NCCL group: device " + std::to_string(d) +
                             " twice (one rank per GPU)");
    }
    devices.push_back(b->device());
  }
  SYV_ASSIGN_OR_RETURN(const NcclApi* api, nccl_api());
  int v = 0;
  SYV_NCCL_CHECK(api->ncclGetVersion(&v));
  const std::string version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) +
                              "." + std::to_string(v % 100);
  std::vector<ncclComm_t> handles(ranks.size(), nullptr);
  int current = -1;
  SYV_CUDA_CHECK(cudaGetDevice(&current));
  const ncclResult_t init =
      api->ncclCommInitAll(handles.data(), static_cast<int>(handles.size()), devices.data());
  SYV_CUDA_CHECK(cudaSetDevice(current));  // ncclCommInitAll may leave another device current
  if (init != ncclSuccess) {
    return Status::Error(std::string("NCCL ") + version + ": ncclCommInitAll over " +
                         std::to_string(ranks.size()) +
                         " GPUs failed: " + api->ncclGetErrorString(init) + " (" +
                         api->ncclGetLastError(nullptr) + ")");
  }
  std::vector<std::unique_ptr<NcclComm>> comms;
  for (size_t r = 0; r < ranks.size(); ++r) {
    comms.push_back(std::make_unique<NcclComm>(handles[r], *ranks[r], static_cast<int>(r),
                                               static_cast<int>(ranks.size())));
  }
  return std::unique_ptr<TpGroup>(std::make_unique<NcclTpGroup>(std::move(comms), version));
}

#endif  // SYV_HAVE_NCCL

}  // namespace syv
