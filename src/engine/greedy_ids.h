// The argmax of each logits row (lowest id on ties), for drafters that propose greedily: on the
// device when the backend samples there (only the ids cross to the host), else on the host.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace syv {

// logits f32 [R, V] in `backend` memory; ids gets R entries. host_scratch: reused host buffer.
void greedy_ids(Backend& backend, const Tensor& logits, std::vector<float>& host_scratch,
                std::vector<int32_t>& ids);

}  // namespace syv
