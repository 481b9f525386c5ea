// The all-reduce of tensor parallelism (model/tensor_parallel.h): one rank's side.
#pragma once

#include "backend/backend.h"

namespace syv {

// t (f32, on the rank's backend) becomes the sum of every rank's t. Every rank calls it the same
// number of times with the same shape, in the same order.
class TpComm {
 public:
  virtual ~TpComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void all_reduce_sum(Backend& backend, Tensor& t) = 0;
};

}  // namespace syv
