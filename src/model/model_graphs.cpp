// Model's graph hooks (model.h "CUDA graphs"): by default the model's one backend's.
#include "model/model.h"

namespace syv {

int Model::capture_forward(const Batch& batch, Outputs& out, const std::function<void()>& then) {
  return backend().capture_graph([this, &batch, &out, then] {
    forward(batch, out);
    if (then) then();
  });
}

void Model::stage_graph_batch(const Batch& batch, int32_t page_size) {
  backend().stage_batch(batch, page_size);
}

void Model::replay_graph(int id) {
  backend().replay_graph(id);
}

void Model::destroy_graph(int id) {
  backend().destroy_graph(id);
}

void Model::set_fixed_max_context(int64_t max_context) {
  backend().set_fixed_max_context(max_context);
}

}  // namespace syv
