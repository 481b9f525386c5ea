// Sizing the host tier (kv/host_tier.h) from EngineOptions: how many host pages and host
// checkpoints, from an explicit count, a byte budget or the machine's free host memory, and the
// start-up log line that says which and why.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "engine/engine.h"
#include "kv/host_tier.h"

namespace syv {

class CacheStore;

// The automatic budget (host_cache_bytes < 0): a quarter of the host memory available now, at
// most kHostTierAutoCap (pinning takes time and other processes need memory too).
inline constexpr int64_t kHostTierAutoCap = int64_t{32} << 30;

struct HostTierPlan {
  int32_t num_pages = 0;
  int32_t num_checkpoints = 0;
  int64_t bytes = 0;   // the budget the counts came from (0 when counts were given)
  std::string reason;  // why this size, for the start-up line
  bool enabled() const { return num_pages > 0 || num_checkpoints > 0; }
};

// Splits `bytes` between pages (page_bytes each) and checkpoints (slot_bytes each) in the device
// pool's proportion: checkpoints get device_checkpoint_bytes / (device_page_bytes +
// device_checkpoint_bytes) of it (none when the device keeps none), pages the rest.
HostTierPlan split_host_budget(int64_t bytes, int64_t page_bytes, int64_t slot_bytes,
                               int64_t device_page_bytes, int64_t device_checkpoint_bytes);

// The plan for `o` (num_pages, num_checkpoints and prefix caching already resolved) over `store`:
// off when host_cache_bytes is 0 and no count is given, or without prefix caching; the counts
// host_num_pages / host_num_checkpoints when either is > 0; else host_cache_bytes split as above,
// with host_cache_bytes < 0 meaning min(MemAvailable / 4, kHostTierAutoCap).
// `available_host_bytes` is MemAvailable (< 0: unknown, then the automatic tier is off).
Result<HostTierPlan> plan_host_tier(const EngineOptions& o, const CacheStore& store,
                                    int64_t available_host_bytes);

}  // namespace syv
