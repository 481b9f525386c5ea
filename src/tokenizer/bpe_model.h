// Byte-level BPE model of tokenizer.json ("model": {"type": "BPE", ...}).
//
// Pieces arrive as raw bytes; each byte starts as the id of its byte-level character, then
// merges are applied lowest rank first (ties: leftmost), exactly as HF's Word::merge_all. The
// merge table is an open-addressing hash on the (left id, right id) pair; results for pieces up
// to kMaxCachedPiece bytes are kept in a sharded, bounded word cache.
// Merges may be written "a b" (HF legacy) or ["a", "b"]. Unsupported options (dropout,
// continuing_subword_prefix, end_of_word_suffix) are refused at load.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace syv {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object without its vocab and merges, which come
  // pre-parsed (see tokenizer_json.h); they are consumed.
  static Result<std::unique_ptr<BpeModel>> from_json(
      const nlohmann::json& model, std::vector<std::pair<std::string, int32_t>>& vocab,
      std::vector<std::pair<std::string, std::string>>& merges);

  // Appends the ids of one pre-tokenized piece (raw bytes). Thread-safe.
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Empty for ids not in the vocabulary.
  const std::string& id_to_token(int32_t id) const;
  // Number of vocabulary entries (HF's Model::get_vocab_size).
  size_t vocab_entries() const { return vocab_.size(); }
  // One past the largest vocabulary id.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }

  static constexpr size_t kMaxCachedPiece = 256;  // bytes

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  // Pair (left, right) -> (rank, merged id); open addressing, linear probing.
  class MergeTable {
   public:
    void build(const std::vector<std::array<int32_t, 4>>& merges);  // {left, right, rank, new}
    // Returns false when the pair has no merge.
    bool find(int32_t left, int32_t right, int32_t* rank, int32_t* new_id) const;

   private:
    struct Slot {
      uint64_t key = ~0ull;
      int32_t rank = 0;
      int32_t new_id = 0;
    };
    std::vector<Slot> slots_;
    uint64_t mask_ = 0;
  };

  struct CacheShard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheShardCapacity = 4096;  // entries; a full shard is cleared

  BpeModel() = default;
  void merge(std::string_view bytes, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::vector<std::string> id_to_token_;
  std::array<int32_t, 256> byte_ids_{};           // id of each byte's byte-level character, or -1
  std::array<int32_t, 256> byte_fallback_ids_{};  // id of "<0xXX>", or -1
  MergeTable merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace syv
