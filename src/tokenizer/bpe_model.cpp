#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace syv {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t mix(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return key;
}

std::string describe(const nlohmann::json& j) {
  return j.dump().substr(0, 80);
}

}  // namespace

void BpeModel::MergeTable::build(const std::vector<std::array<int32_t, 4>>& merges) {
  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity *= 2;
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (const auto& m : merges) {
    const uint64_t key = pair_key(m[0], m[1]);
    uint64_t i = mix(key) & mask_;
    while (slots_[i].key != ~0ull && slots_[i].key != key) i = (i + 1) & mask_;
    // A repeated pair keeps its last entry, as HF's HashMap collect does.
    slots_[i] = Slot{key, m[2], m[3]};
  }
}

bool BpeModel::MergeTable::find(int32_t left, int32_t right, int32_t* rank, int32_t* new_id) const {
  const uint64_t key = pair_key(left, right);
  uint64_t i = mix(key) & mask_;
  while (true) {
    const Slot& slot = slots_[i];
    if (slot.key == key) {
      *rank = slot.rank;
      *new_id = slot.new_id;
      return true;
    }
    if (slot.key == ~0ull) return false;
    i = (i + 1) & mask_;
  }
}

Result<std::unique_ptr<BpeModel>> BpeModel::from_json(
    const nlohmann::json& model, std::vector<std::pair<std::string, int32_t>>& vocab,
    std::vector<std::pair<std::string, std::string>>& merge_list) {
  if (!model.is_object())
    return Status::Error("model: expected an object, found " + describe(model));
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0)) {
    return Status::Error("model.dropout: BPE dropout is not supported, found " +
                         describe(model["dropout"]));
  }
  for (const char* field : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(field) && !model[field].is_null() &&
        !(model[field].is_string() && model[field].get<std::string>().empty())) {
      return Status::Error(std::string("model.") + field + ": not supported, found " +
                           describe(model[field]));
    }
  }
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  int32_t max_id = -1;
  bpe->vocab_.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    max_id = std::max(max_id, id);
    bpe->vocab_[std::move(token)] = id;
  }
  bpe->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : bpe->vocab_) bpe->id_to_token_[static_cast<size_t>(id)] = token;

  for (int b = 0; b < 256; ++b) {
    std::string ch;
    utf8::append(ch, byte_level::byte_to_char(static_cast<uint8_t>(b)));
    auto it = bpe->vocab_.find(ch);
    bpe->byte_ids_[b] = it == bpe->vocab_.end() ? -1 : it->second;
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto fb = bpe->vocab_.find(std::string_view(name));
    bpe->byte_fallback_ids_[b] = fb == bpe->vocab_.end() ? -1 : fb->second;
  }

  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const std::string unk = model["unk_token"].get<std::string>();
    auto it = bpe->vocab_.find(unk);
    if (it == bpe->vocab_.end()) {
      return Status::Error("model.unk_token \"" + unk + "\" is not in model.vocab");
    }
    bpe->unk_id_ = it->second;
  }
  bpe->fuse_unk_ = model.value("fuse_unk", false);
  bpe->byte_fallback_ = model.value("byte_fallback", false);
  bpe->ignore_merges_ = model.value("ignore_merges", false);

  std::vector<std::array<int32_t, 4>> merges;
  merges.reserve(merge_list.size());
  int32_t rank = 0;
  std::string joined;
  for (size_t index = 0; index < merge_list.size(); ++index) {
    const auto& [left, right] = merge_list[index];
    joined.assign(left).append(right);
    auto l = bpe->vocab_.find(left), r = bpe->vocab_.find(right), m = bpe->vocab_.find(joined);
    if (l == bpe->vocab_.end() || r == bpe->vocab_.end() || m == bpe->vocab_.end()) {
      const std::string& missing = l == bpe->vocab_.end()   ? left
                                   : r == bpe->vocab_.end() ? right
                                                            : joined;
      return Status::Error("model.merges[" + std::to_string(index) + "] (\"" + left + " " + right +
                           "\"): token \"" + missing + "\" is not in model.vocab");
    }
    merges.push_back({l->second, r->second, rank++, m->second});
  }
  merge_list.clear();
  merge_list.shrink_to_fit();
  bpe->merges_.build(merges);
  return bpe;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string& BpeModel::id_to_token(int32_t id) const {
  static const std::string empty;
  if (id < 0 || id >= id_limit()) return empty;
  return id_to_token_[static_cast<size_t>(id)];
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.size() == 1 && byte_ids_[static_cast<uint8_t>(bytes[0])] >= 0) {
    out.push_back(byte_ids_[static_cast<uint8_t>(bytes[0])]);
    return;
  }
  if (bytes.size() > kMaxCachedPiece) {
    merge(bytes, out);
    return;
  }
  const size_t hash = StringHash{}(bytes);
  CacheShard& shard = cache_[(hash >> 7) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.map.find(bytes);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t begin = out.size();
  merge(bytes, out);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= kCacheShardCapacity) shard.map.clear();
  shard.map.emplace(std::string(bytes), std::vector<int32_t>(out.begin() + begin, out.end()));
}

void BpeModel::merge(std::string_view bytes, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    auto it = vocab_.find(byte_level::encode(bytes));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool removed;
  };
  struct Merge {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    // priority_queue pops the largest: lowest rank first, then leftmost position.
    bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Merge> queue;  // a max-heap under Merge::operator<
  symbols.clear();
  // Initial symbols: one per byte (its byte-level character), with HF's unknown handling.
  int32_t pending_unk = -1;  // HF delays adding an unknown so that fuse_unk can extend it
  auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, false});
  };
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (byte_ids_[b] >= 0) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(byte_ids_[b]);
      continue;
    }
    if (byte_fallback_ && byte_fallback_ids_[b] >= 0) {
      add(byte_fallback_ids_[b]);  // HF adds byte-fallback tokens without flushing the unknown
      continue;
    }
    if (unk_id_ >= 0) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  queue.clear();
  auto push = [&](Merge m) {
    queue.push_back(m);
    std::push_heap(queue.begin(), queue.end());
  };
  int32_t rank = 0, new_id = 0;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (merges_.find(symbols[i].id, symbols[i + 1].id, &rank, &new_id)) {
      push({rank, static_cast<int32_t>(i), new_id});
    }
  }
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const Merge top = queue.back();
    queue.pop_back();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (left.removed || left.next < 0) continue;
    const Symbol right = symbols[static_cast<size_t>(left.next)];
    // Skip stale entries: the pair at this position changed since it was queued.
    if (!merges_.find(left.id, right.id, &rank, &new_id) || new_id != top.new_id) continue;
    symbols[static_cast<size_t>(left.next)].removed = true;
    left.id = top.new_id;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0 &&
        merges_.find(symbols[static_cast<size_t>(left.prev)].id, left.id, &rank, &new_id)) {
      push({rank, left.prev, new_id});
    }
    if (left.next >= 0 &&
        merges_.find(left.id, symbols[static_cast<size_t>(left.next)].id, &rank, &new_id)) {
      push({rank, top.pos, new_id});
    }
  }
  for (const Symbol& s : symbols) {
    if (!s.removed) out.push_back(s.id);
  }
}

}  // namespace syv
