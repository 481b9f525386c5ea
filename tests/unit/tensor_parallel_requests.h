// The requests the tensor-parallel tests compare a split model with one rank on (tests/unit/
// tensor_parallel_test.cpp on the CPU, tests/gpu/tensor_parallel_gpu_test.cpp on GPUs), and the
// bit-for-bit comparison of two runs of the same arithmetic.
#pragma once

#include <gtest/gtest.h>

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

// Every request's sample 0 the same: tokens, logprobs and prompt logprobs to the bit (runs that
// compute alike: graphs on and off in batch-invariant mode, one rank through NCCL and one GPU).
inline void expect_same_outputs(const std::vector<RequestOutput>& got,
                                const std::vector<RequestOutput>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const SampleOutput& g = got[i].samples.at(0);
    const SampleOutput& w = want[i].samples.at(0);
    EXPECT_EQ(g.tokens, w.tokens) << "request " << i;
    EXPECT_EQ(g.logprobs, w.logprobs) << "request " << i;
    ASSERT_EQ(g.prompt_logprobs.size(), w.prompt_logprobs.size()) << "request " << i;
    for (size_t t = 0; t < g.prompt_logprobs.size(); ++t)
      EXPECT_EQ(g.prompt_logprobs[t].token.logprob, w.prompt_logprobs[t].token.logprob)
          << "request " << i << " at " << t;
  }
}

}  // namespace syv::testing
