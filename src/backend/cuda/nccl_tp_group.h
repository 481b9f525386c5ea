// Tensor parallelism over GPUs (model/tensor_parallel.h): a TpGroup whose all-reduce is NCCL's,
// one communicator per rank made together by ncclCommInitAll in this process (one GPU and one
// thread per rank), enqueued on each rank's CUDA backend stream. No CUDA or NCCL includes here.
//
// Built when CMake finds NCCL (nccl.h; SYV_HAVE_NCCL): the library itself, libnccl.so.2, is
// opened with dlopen when the first group is made (as cuBLASLt is: backend/cuda/cublaslt_api.h),
// so a syv that never runs tensor parallel neither loads it nor needs it installed.
#pragma once

#include <memory>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/tp_comm.h"
#include "core/status.h"

namespace syv {

// Whether this build has the NCCL group (SYV_HAVE_NCCL).
bool nccl_available();

// A group over `ranks` (rank r = ranks[r]; at least one; each on a device of its own). Errors
// (no NCCL in this build, libnccl.so.2 not found, a device twice, ncclCommInitAll failing) are
// values naming the cause. all_reduce_sum() takes f32, bf16 or f16 tensors of the rank's device
// memory, sums in place (ncclAllReduce, ncclSum) on the rank backend's stream, and aborts with the
// file, the line and NCCL's message on an NCCL error (SYV_NCCL_CHECK). The group must outlive
// every all_reduce_sum() in flight (destroying it synchronizes every rank's stream first).
Result<std::unique_ptr<TpGroup>> make_nccl_tp_group(const std::vector<CudaBackend*>& ranks);

}  // namespace syv
