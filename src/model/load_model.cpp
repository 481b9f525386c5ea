// load_model(): prepare_model() (the checks, model/prepare_model.h), then the weights.
#include "model/prepare_model.h"

#include "core/check.h"

namespace syv {

void Model::mtp_forward(const Batch& batch, const Tensor& hidden, Outputs& out) {
  (void)batch;
  (void)hidden;
  (void)out;
  SYV_FATAL() << "mtp_forward() on a model loaded without an MTP head (LoadOptions::mtp)";
}

Result<std::unique_ptr<CacheStore>> make_cache_store(Model& model, const CacheConfig& config) {
  SYV_ASSIGN_OR_RETURN(std::unique_ptr<CacheStore> store,
                       CacheStore::create(model.cache_spec(), config, model.backend()));
  model.bind_cache(*store);
  return store;
}

Result<std::unique_ptr<Model>> load_prepared_model(const PreparedModel& prepared, Backend& backend,
                                                   const LoadOptions& options) {
  const WeightStore* weights = prepared.store ? &*prepared.store : nullptr;
  return prepared.arch->load(prepared.config, weights, backend, options);
}

Result<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend,
                                          const LoadOptions& options) {
  SYV_ASSIGN_OR_RETURN(PreparedModel prepared, prepare_model(dir, backend, options));
  return load_prepared_model(prepared, backend, options);
}

}  // namespace syv
