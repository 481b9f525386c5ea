#include "server/responses_store.h"

namespace syv::server {

ResponsesStore::ResponsesStore(ResponsesStoreOptions options, Clock clock)
    : options_(options), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

void ResponsesStore::evict_locked(std::chrono::steady_clock::time_point now) {
  // Entries are in put() order and share one lifetime, so the expired ones are a prefix.
  while (!order_.empty() &&
         (now - order_.front().stored >= options_.ttl || order_.size() > options_.max_entries)) {
    by_id_.erase(order_.front().id);
    order_.pop_front();
  }
}

void ResponsesStore::put(StoredResponse stored) {
  if (options_.max_entries == 0) return;
  const std::string id = stored.response.at("id").get<std::string>();
  const auto now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    order_.erase(it->second);
    by_id_.erase(it);
  }
  order_.push_back(Entry{id, std::move(stored), now});
  by_id_[id] = std::prev(order_.end());
  evict_locked(now);
}

const ResponsesStore::Entry* ResponsesStore::find_locked(const std::string& id) {
  evict_locked(clock_());
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &*it->second;
}

std::optional<StoredResponse> ResponsesStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = find_locked(id);
  if (e == nullptr) return std::nullopt;
  return e->value;
}

std::optional<nlohmann::ordered_json> ResponsesStore::conversation(const std::string& id) {
  std::optional<StoredResponse> e = get(id);
  if (!e.has_value()) return std::nullopt;
  return std::move(e->conversation);
}

std::optional<nlohmann::ordered_json> ResponsesStore::response(const std::string& id) {
  std::optional<StoredResponse> e = get(id);
  if (!e.has_value()) return std::nullopt;
  return std::move(e->response);
}

bool ResponsesStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (find_locked(id) == nullptr) return false;
  auto it = by_id_.find(id);
  order_.erase(it->second);
  by_id_.erase(it);
  return true;
}

std::optional<nlohmann::ordered_json> ResponsesStore::item(const std::string& item_id) {
  std::lock_guard<std::mutex> lock(mu_);
  evict_locked(clock_());
  const nlohmann::ordered_json none = nlohmann::ordered_json::array();
  for (auto e = order_.rbegin(); e != order_.rend(); ++e) {
    const StoredResponse& v = e->value;
    const auto output = v.response.find("output");
    for (const nlohmann::ordered_json* list :
         {output == v.response.end() ? &none : &*output, &v.input_items}) {
      if (!list->is_array()) continue;
      for (const nlohmann::ordered_json& it : *list) {
        if (it.is_object() && it.value("id", "") == item_id) return it;
      }
    }
  }
  return std::nullopt;
}

size_t ResponsesStore::size() {
  std::lock_guard<std::mutex> lock(mu_);
  evict_locked(clock_());
  return order_.size();
}

}  // namespace syv::server
