// The all-reduce of tensor parallelism (model/tensor_parallel.h): one rank's side (TpComm), and
// the group that hands every rank its side (TpGroup). Two forms: HostTpGroup (model/
// tensor_parallel.h: simulated ranks, a sum in rank order on the host) and the NCCL group of the
// CUDA backend (backend/cuda/nccl_tp_group.h: one GPU per rank).
#pragma once

#include <string>

#include "backend/backend.h"

namespace syv {

// t (the rank's backend's memory, in its activation dtype: f32 on the CPU, bf16 on CUDA) becomes
// the sum of every rank's t. Every rank calls it the same number of times with the same shape, in
// the same order, each from its own thread (on CUDA after Backend::make_current()). It is ordered
// with the backend's ops like one of them (on CUDA: enqueued on the backend's stream, no host
// synchronisation, so a CUDA graph may capture it).
class TpComm {
 public:
  virtual ~TpComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void all_reduce_sum(Backend& backend, Tensor& t) = 0;
};

// The ranks of one tensor-parallel model; comm(r) lives as long as the group.
class TpGroup {
 public:
  virtual ~TpGroup() = default;
  virtual int size() const = 0;
  virtual TpComm& comm(int rank) = 0;
  // For the start-up log: "simulated on the host", "NCCL 2.28.9 over 2 GPUs".
  virtual std::string describe() const = 0;
};

}  // namespace syv
