// Generator over the real Engine (one engine thread; see engine/engine.h).
#pragma once

#include "engine/engine.h"
#include "server/generator.h"

namespace syv::server {

class EngineGenerator final : public Generator {
 public:
  explicit EngineGenerator(Engine& engine) : engine_(engine) {}  // engine must outlive this

  Result<std::shared_ptr<RequestHandle>> submit(Request request) override {
    return engine_.submit(std::move(request));
  }
  void cancel(const RequestHandle& handle) override { engine_.cancel(handle); }
  EngineStats stats() const override { return engine_.stats(); }
  int32_t max_model_len() const override { return engine_.options().max_model_len; }

 private:
  Engine& engine_;
};

}  // namespace syv::server
