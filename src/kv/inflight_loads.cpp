#include "kv/inflight_loads.h"

#include <sstream>

#include "core/check.h"

namespace syv {

LoadTicket InflightLoads::add(CopyEvent event, const std::vector<int32_t>& pages, int32_t slot) {
  if (event.empty()) return LoadTicket{};
  Load load{next_id_++, event, pages, slot};
  for (int32_t page : pages) page_load_[page] = load.id;
  if (slot >= 0) slot_load_[slot] = load.id;
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
    for (int32_t page : load.pages) {
      auto it = page_load_.find(page);
      if (it != page_load_.end() && it->second <= id) page_load_.erase(it);
    }
    if (load.slot >= 0) {
      auto it = slot_load_.find(load.slot);
      if (it != slot_load_.end() && it->second <= id) slot_load_.erase(it);
    }
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
  auto lists = [&](uint64_t id, int32_t page, int32_t slot) {
    auto it = by_id.find(id);
    if (it == by_id.end()) return false;
    const Load& load = *it->second;
    if (slot >= 0) return load.slot == slot;
    for (int32_t p : load.pages)
      if (p == page) return true;
    return false;
  };
  for (const auto& [page, id] : page_load_)
    if (!lists(id, page, -1))
      out << "page " << page << " in flight under unknown load " << id << "; ";
  for (const auto& [slot, id] : slot_load_)
    if (!lists(id, -1, slot))
      out << "slot " << slot << " in flight under unknown load " << id << "; ";
  return out.str();
}

}  // namespace syv
