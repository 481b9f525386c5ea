// The CPU backend with CUDA graph hooks, for the graph paths without a GPU: capture_graph runs
// the step twice (the warm-up, then the "capture") and keeps it; replay_graph runs it again, so a
// replay reads the batch the caller staged as a CUDA graph re-reads its staging; stage_batch
// validates the batch and records its shape. Counts what was captured, replayed and destroyed
// (engine_graphs_test: GraphRunner; tensor_parallel_graphs_test: every rank's graphs). Hooks and
// counters of one instance are called from one thread at a time (a tensor-parallel rank's thread
// or the engine's).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/host_batch_meta.h"

namespace syv::testing {

class FakeGraphBackend final : public CpuBackend {
 public:
  struct Shape {
    int32_t tokens, seqs, rows, width;
    bool operator==(const Shape&) const = default;
  };

  std::string name() const override { return "fake-graphs"; }
  bool supports_graphs() const override { return true; }
  int capture_graph(const std::function<void()>& step) override {
    step();  // warm-up
    step();  // the capture's host side
    steps_.push_back(step);
    return static_cast<int>(steps_.size()) - 1;
  }
  void stage_batch(const Batch& b, int32_t page_size) override {
    (void)build_host_batch_meta(b, page_size);  // aborts on an inconsistent batch
    staged_ = Shape{b.num_tokens(), b.num_seqs(), static_cast<int32_t>(b.logit_rows.size()),
                    b.max_pages_per_seq};
    staged_shapes.push_back(staged_);
  }
  void replay_graph(int id) override {
    ASSERT_TRUE(id >= 0 && id < static_cast<int>(steps_.size()) &&
                steps_[static_cast<size_t>(id)] != nullptr)
        << "graph " << id;
    auto [it, first] = graph_shapes.emplace(id, staged_);
    EXPECT_TRUE(first || it->second == staged_) << "graph " << id << " replayed on another shape";
    ++replays;
    steps_[static_cast<size_t>(id)]();
  }
  void destroy_graph(int id) override {
    ASSERT_TRUE(steps_[static_cast<size_t>(id)] != nullptr) << "graph " << id << " destroyed twice";
    steps_[static_cast<size_t>(id)] = nullptr;
    ++destroyed;
  }
  void set_fixed_max_context(int64_t n) override { fixed_max_context = n; }

  int32_t captured() const { return static_cast<int32_t>(steps_.size()); }
  std::vector<Shape> staged_shapes;
  std::map<int, Shape> graph_shapes;  // the shape each graph was first replayed on
  int64_t replays = 0;
  int32_t destroyed = 0;
  int64_t fixed_max_context = -1;

 private:
  std::vector<std::function<void()>> steps_;
  Shape staged_{};
};

}  // namespace syv::testing
