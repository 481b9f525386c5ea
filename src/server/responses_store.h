// The responses /v1/responses kept in memory for previous_response_id (and GET / DELETE
// /v1/responses/{id}, GET /v1/responses/{id}/input_items): each entry is the response object, the
// conversation it ends (chat messages: the history, the request's input, its output; instructions
// excluded, as OpenAI does not carry them over) and its input items (the Responses items that
// made its prompt: the chain's earlier inputs and outputs, then its own input, each with an id).
// Bounded in count (the oldest entry goes first) and in age (an entry older than the expiry is
// gone, whether or not it was read). Nothing survives a restart.
//
// Thread safety: every call takes the store's lock; safe from many HTTP threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace syv::server {

// One stored response.
struct StoredResponse {
  nlohmann::ordered_json response;      // the response object ("id", "output", ...)
  nlohmann::ordered_json conversation;  // chat messages, its output included
  nlohmann::ordered_json input_items;   // Responses items with ids, its output excluded
};

struct ResponsesStoreOptions {
  size_t max_entries = 1024;                        // 0: nothing is stored
  std::chrono::seconds ttl{std::chrono::hours(1)};  // an entry's lifetime from its put()
};

class ResponsesStore {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `clock` (tests) replaces steady_clock::now.
  explicit ResponsesStore(ResponsesStoreOptions options = {}, Clock clock = nullptr);

  // Keeps `stored` under its response's "id"; replaces an entry of the same id. Evicts expired
  // entries, then the oldest beyond max_entries.
  void put(StoredResponse stored);

  // The entry of `id` (a copy), or nullopt when unknown or expired.
  std::optional<StoredResponse> get(const std::string& id);
  // Its conversation / response object alone.
  std::optional<nlohmann::ordered_json> conversation(const std::string& id);
  std::optional<nlohmann::ordered_json> response(const std::string& id);
  // Removes `id`; false when it was unknown or expired.
  bool erase(const std::string& id);
  // The item of id `item_id` among the kept responses' output and input items (the newest
  // response first), for input items of type item_reference; nullopt when none has it. Linear in
  // the items kept.
  std::optional<nlohmann::ordered_json> item(const std::string& item_id);

  size_t size();
  const ResponsesStoreOptions& options() const { return options_; }

 private:
  struct Entry {
    std::string id;
    StoredResponse value;
    std::chrono::steady_clock::time_point stored;
  };
  using Order = std::list<Entry>;  // oldest first

  void evict_locked(std::chrono::steady_clock::time_point now);
  const Entry* find_locked(const std::string& id);

  ResponsesStoreOptions options_;
  Clock clock_;
  std::mutex mu_;
  Order order_;
  std::unordered_map<std::string, Order::iterator> by_id_;
};

}  // namespace syv::server
