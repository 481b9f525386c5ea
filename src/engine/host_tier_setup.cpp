#include "engine/host_tier_setup.h"

#include <algorithm>

#include "backend/available_memory.h"
#include "kv/cache_store.h"

namespace syv {

HostTierPlan split_host_budget(int64_t bytes, int64_t page_bytes, int64_t slot_bytes,
                               int64_t device_page_bytes, int64_t device_checkpoint_bytes) {
  HostTierPlan plan;
  plan.bytes = bytes;
  const int64_t device = device_page_bytes + device_checkpoint_bytes;
  if (slot_bytes > 0 && device_checkpoint_bytes > 0 && device > 0) {
    const double share = static_cast<double>(device_checkpoint_bytes) / static_cast<double>(device);
    plan.num_checkpoints = static_cast<int32_t>(std::min<int64_t>(
        static_cast<int64_t>(static_cast<double>(bytes) * share) / slot_bytes, 1 << 24));
  }
  if (page_bytes > 0) {
    plan.num_pages = static_cast<int32_t>(std::min<int64_t>(
        (bytes - int64_t{plan.num_checkpoints} * slot_bytes) / page_bytes, 1 << 24));
  }
  return plan;
}

Result<HostTierPlan> plan_host_tier(const EngineOptions& o, const CacheStore& store,
                                    int64_t available_host_bytes) {
  if (o.host_num_pages < 0 || o.host_num_checkpoints < 0) {
    return Status::Error(
        "engine options host_num_pages / host_num_checkpoints: expected >= 0, "
        "found " +
        std::to_string(o.host_num_pages) + " / " + std::to_string(o.host_num_checkpoints));
  }
  const bool counts = o.host_num_pages > 0 || o.host_num_checkpoints > 0;
  HostTierPlan off;
  if (!counts && o.host_cache_bytes == 0) {
    off.reason = "off (--host-cache-gb 0)";
    return off;
  }
  if (!o.enable_prefix_caching) {
    off.reason = "off (prefix caching is off: nothing could hit it)";
    return off;
  }
  const bool hybrid = store.spec().has_recurrent_state();
  if (counts) {
    if (o.host_num_checkpoints > 0 && !hybrid) {
      return Status::Error(
          "engine option host_num_checkpoints: the model has no recurrent state (only hybrid "
          "models have checkpoints)");
    }
    HostTierPlan plan;
    plan.num_pages = o.host_num_pages;
    plan.num_checkpoints = o.host_num_checkpoints;
    plan.reason = "sized by host_num_pages / host_num_checkpoints";
    return plan;
  }
  int64_t bytes = o.host_cache_bytes;
  std::string reason;
  if (bytes < 0) {
    if (available_host_bytes < 0) {
      off.reason = "off (free host memory unknown: /proc/meminfo unreadable; set --host-cache-gb)";
      return off;
    }
    bytes = std::min(available_host_bytes / 4, kHostTierAutoCap);
    reason = "automatic: min(1/4 of " + format_bytes(available_host_bytes) +
             " available host memory, " + format_bytes(kHostTierAutoCap) + ")";
  } else {
    reason = "--host-cache-gb " + format_bytes(bytes);
  }
  const int64_t device_pages = store.external_page_bytes() * o.num_pages;
  const int64_t device_ckpts = hybrid ? store.external_slot_bytes() * o.num_checkpoints : 0;
  HostTierPlan plan =
      split_host_budget(bytes, store.external_page_bytes(),
                        hybrid ? store.external_slot_bytes() : 0, device_pages, device_ckpts);
  plan.reason = reason + (hybrid ? ", split between pages and checkpoints as on the device" : "");
  if (!plan.enabled() && o.host_cache_bytes < 0) {
    off.reason = "off (" + reason + " holds no page)";
    return off;
  }
  if (!plan.enabled()) {
    return Status::Error("host tier: " + format_bytes(bytes) + " hold no page of " +
                         format_bytes(store.external_page_bytes()) + " (" + reason +
                         "); use --host-cache-gb 0 to turn it off");
  }
  return plan;
}

}  // namespace syv
