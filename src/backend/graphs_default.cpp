// Default bodies of Backend's CUDA-graph hooks (backend.h): backends without graphs refuse loudly;
// callers check supports_graphs() first and run every step eagerly otherwise.
#include "backend/backend.h"
#include "core/check.h"

namespace syv {

int Backend::capture_graph(const std::function<void()>&) {
  SYV_FATAL() << "capture_graph is not implemented on backend " << name()
              << " (check supports_graphs(); steps then run eagerly)";
  return -1;
}

void Backend::stage_batch(const Batch&, int32_t) {
  SYV_FATAL() << "stage_batch is not implemented on backend " << name()
              << " (check supports_graphs())";
}

void Backend::replay_graph(int id) {
  SYV_FATAL() << "replay_graph(" << id << ") is not implemented on backend " << name()
              << " (check supports_graphs())";
}

void Backend::destroy_graph(int id) {
  SYV_FATAL() << "destroy_graph(" << id << ") is not implemented on backend " << name()
              << " (check supports_graphs())";
}

}  // namespace syv
