#include "kv/prefix_index.h"

#include <xxhash.h>

#include <algorithm>
#include <sstream>

#include "core/check.h"

namespace syv {

PrefixIndex::PrefixIndex(int32_t num_pages, int32_t page_size, int32_t lookahead)
    : page_size_(page_size),
      lookahead_(lookahead),
      registered_(num_pages, false),
      key_(num_pages, 0),
      parent_(num_pages, 0),
      tokens_(static_cast<size_t>(num_pages) * (page_size + lookahead), 0) {
  SYV_CHECK(page_size > 0 && lookahead >= 0)
      << "page size " << page_size << ", lookahead " << lookahead;
  by_key_.reserve(static_cast<size_t>(num_pages));
}

uint64_t PrefixIndex::page_key(uint64_t parent, const int32_t* tokens, int32_t n) {
  return XXH3_64bits_withSeed(tokens, static_cast<size_t>(n) * sizeof(int32_t), parent);
}

int32_t PrefixIndex::find(uint64_t parent, uint64_t key, const int32_t* tokens) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return -1;
  const int32_t page = it->second;
  if (parent_[page] != parent) return -1;
  const int32_t* stored = &tokens_[static_cast<size_t>(page) * key_tokens()];
  if (!std::equal(stored, stored + key_tokens(), tokens)) return -1;
  return page;
}

bool PrefixIndex::insert(uint64_t parent, uint64_t key, const int32_t* tokens, int32_t page) {
  SYV_CHECK(page >= 0 && page < static_cast<int32_t>(registered_.size())) << "page " << page;
  SYV_CHECK(!registered_[page]) << "page " << page << " registered twice";
  if (!by_key_.emplace(key, page).second) return false;
  registered_[page] = true;
  key_[page] = key;
  parent_[page] = parent;
  std::copy(tokens, tokens + key_tokens(), &tokens_[static_cast<size_t>(page) * key_tokens()]);
  return true;
}

void PrefixIndex::erase(int32_t page) {
  if (!registered_[page]) return;
  auto it = by_key_.find(key_[page]);
  SYV_CHECK(it != by_key_.end() && it->second == page) << "index lost page " << page;
  by_key_.erase(it);
  registered_[page] = false;
}

std::string PrefixIndex::check_integrity() const {
  std::ostringstream err;
  int32_t registered = 0;
  for (size_t p = 0; p < registered_.size(); ++p) {
    if (!registered_[p]) continue;
    ++registered;
    auto it = by_key_.find(key_[p]);
    if (it == by_key_.end() || it->second != static_cast<int32_t>(p)) {
      err << "registered page " << p << " not mapped by its key; ";
      break;
    }
    const size_t n = static_cast<size_t>(key_tokens());
    if (page_key(parent_[p], &tokens_[p * n], key_tokens()) != key_[p]) {
      err << "page " << p << " key does not match its tokens; ";
      break;
    }
  }
  if (registered != size())
    err << "index maps " << size() << " keys but " << registered << " pages are registered";
  return err.str();
}

}  // namespace syv
