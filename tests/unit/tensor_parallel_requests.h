// The requests the tensor-parallel tests compare a split model with one rank on (tests/unit/
// tensor_parallel_test.cpp on the CPU, tests/gpu/tensor_parallel_gpu_test.cpp on GPUs).
#pragma once

#include <cstdint>
#include <vector>

#include "unit/engine_harness.h"

namespace syv::testing {

// 5 requests whose prompt logprobs (every position's 5 most likely tokens) compare the logits
// (such requests take no prefix hit), then 6 whose even ones share an 80-token prefix: prefix hits
// (for the hybrids through the checkpoint at token 64, the default interval of 4 pages of 16).
inline std::vector<Request> split_requests(int32_t vocab) {
  std::vector<Request> requests = shared_prefix_requests(vocab, 7, 5, 24, 20, 10);
  for (Request& q : requests) {
    q.params.logprobs = true;
    q.params.prompt_logprobs = 5;
  }
  for (Request& q : shared_prefix_requests(vocab, 8, 6, 80, 20, 10)) {
    q.params.logprobs = true;
    requests.push_back(q);
  }
  return requests;
}

}  // namespace syv::testing
