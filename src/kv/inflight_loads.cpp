#include "kv/inflight_loads.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"

namespace syv {

namespace {

// Forgets `key`'s entry in `map` when it names a load up to `id` (a newer load may have taken it
// over).
void forget_through(std::unordered_map<int32_t, uint64_t>& map, int32_t key, uint64_t id) {
  auto it = map.find(key);
  if (it != map.end() && it->second <= id) map.erase(it);
}

}  // namespace

LoadTicket InflightLoads::add(CopyEvent event, const std::vector<int32_t>& pages, int32_t slot,
                              const std::vector<int32_t>& host_pages, int32_t host_checkpoint) {
  if (event.empty()) return LoadTicket{};
  Load load{next_id_++, event, pages, slot, host_pages, host_checkpoint};
  for (int32_t page : pages) page_load_[page] = load.id;
  if (slot >= 0) slot_load_[slot] = load.id;
  for (int32_t entry : host_pages) host_page_read_[entry] = load.id;
  if (host_checkpoint >= 0) host_ckpt_read_[host_checkpoint] = load.id;
  loads_.push_back(std::move(load));
  return LoadTicket{loads_.back().id, std::move(event)};
}

LoadTicket InflightLoads::newest_into(const std::vector<int32_t>& pages) const {
  uint64_t newest = 0;
  for (int32_t page : pages) {
    auto it = page_load_.find(page);
    if (it != page_load_.end() && it->second > newest) newest = it->second;
  }
  if (newest == 0) return LoadTicket{};
  for (const Load& load : loads_)
    if (load.id == newest) return LoadTicket{load.id, load.event};
  SYV_FATAL() << "page in flight under load " << newest << ", which is not unsettled";
  return LoadTicket{};
}

void InflightLoads::poll() {
  if (loads_.empty()) return;
  // The newest first: once it landed every load did (one query while one load is in flight).
  if (backend_.copy_done(loads_.back().event)) {
    settle_through(loads_.back().id);
    return;
  }
  uint64_t landed = 0;
  for (size_t i = 0; i + 1 < loads_.size(); ++i) {
    if (!backend_.copy_done(loads_[i].event)) break;
    landed = loads_[i].id;
  }
  if (landed > 0) settle_through(landed);
}

void InflightLoads::order_after(const LoadTicket& t) {
  if (!t.pending()) return;
  backend_.order_after_copy(t.event);
  settle_through(t.id);
}

void InflightLoads::wait_all() {
  if (loads_.empty()) return;
  backend_.wait_copy(loads_.back().event);
  settle_through(loads_.back().id);
}

void InflightLoads::settle_through(uint64_t id) {
  if (id <= settled_) return;
  settled_ = id;
  while (!loads_.empty() && loads_.front().id <= id) {
    const Load& load = loads_.front();
    for (int32_t page : load.pages) forget_through(page_load_, page, id);
    if (load.slot >= 0) forget_through(slot_load_, load.slot, id);
    for (int32_t entry : load.host_pages) forget_through(host_page_read_, entry, id);
    if (load.host_checkpoint >= 0) forget_through(host_ckpt_read_, load.host_checkpoint, id);
    loads_.pop_front();
  }
}

std::string InflightLoads::check_integrity() const {
  std::ostringstream out;
  uint64_t prev = settled_;
  std::unordered_map<uint64_t, const Load*> by_id;
  for (const Load& load : loads_) {
    if (load.event.empty() || load.id <= prev || load.id >= next_id_)
      out << "unsettled load " << load.id << " after " << prev << " (settled " << settled_
          << ", next " << next_id_ << ", event " << (load.event.empty() ? "empty" : "set") << "); ";
    prev = load.id;
    by_id[load.id] = &load;
  }
  auto load_of = [&](uint64_t id) -> const Load* {
    auto it = by_id.find(id);
    return it == by_id.end() ? nullptr : it->second;
  };
  // Every key of `map` is listed by the unsettled load it names, in `list` / as `one`.
  auto check_list = [&](const std::unordered_map<int32_t, uint64_t>& map,
                        std::vector<int32_t> Load::*list, const char* what) {
    for (const auto& [key, id] : map) {
      const Load* load = load_of(id);
      if (load == nullptr ||
          std::find((load->*list).begin(), (load->*list).end(), key) == (load->*list).end())
        out << what << " " << key << " under unknown load " << id << "; ";
    }
  };
  auto check_one = [&](const std::unordered_map<int32_t, uint64_t>& map, int32_t Load::*one,
                       const char* what) {
    for (const auto& [key, id] : map) {
      const Load* load = load_of(id);
      if (load == nullptr || load->*one != key)
        out << what << " " << key << " under unknown load " << id << "; ";
    }
  };
  check_list(page_load_, &Load::pages, "page in flight");
  check_one(slot_load_, &Load::slot, "slot in flight");
  check_list(host_page_read_, &Load::host_pages, "host page read");
  check_one(host_ckpt_read_, &Load::host_checkpoint, "host checkpoint read");
  return out.str();
}

}  // namespace syv
