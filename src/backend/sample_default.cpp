// Default body of Backend::sample() (backend.h): backends without device sampling refuse loudly;
// callers check supports_sampling() first and sample on the host otherwise.
#include "backend/backend.h"
#include "core/check.h"

namespace syv {

void Backend::sample(const Tensor&, const std::vector<SampleRow>&,
                     const std::vector<SamplePenalty>&, int32_t*, Tensor*) {
  SYV_FATAL() << "op sample is not implemented on backend " << name()
              << " (check supports_sampling(); the engine samples on the host then)";
}

}  // namespace syv
