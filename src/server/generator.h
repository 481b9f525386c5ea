// The server's view of the engine: submit a tokenized request, read its events from the returned
// handle, cancel it, read counters. EngineGenerator (engine_bridge.h) adapts the real Engine;
// tests substitute a scripted generator to exercise the HTTP layer without a model.
//
// Thread safety: every method may be called from any HTTP thread at once.
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "engine/stats.h"

namespace syv::server {

class Generator {
 public:
  virtual ~Generator() = default;
  // Queues the request; errors name the field. Codes: kInvalidArgument for out-of-range
  // parameters (HTTP 400), kUnavailable when the engine is stopped or stopping (HTTP 503).
  virtual Result<std::shared_ptr<RequestHandle>> submit(Request request) = 0;
  // Ends every unfinished sample with "abort" and frees the request's pages at the next step.
  virtual void cancel(const RequestHandle& handle) = 0;
  virtual EngineStats stats() const = 0;
  // Prompt + generated tokens of one sequence at most.
  virtual int32_t max_model_len() const = 0;
};

}  // namespace syv::server
