#include "grammar/token_trie.h"

#include <algorithm>
#include <string_view>

namespace syv::grammar {

TokenTrie::TokenTrie(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  for (int32_t id = 0; id < vocab_size(); ++id) {
    const size_t n = bytes_[static_cast<size_t>(id)].size();
    if (n > 0 && n <= 65535) token_ids_.push_back(id);
  }
  auto view = [&](int32_t id) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    return std::basic_string_view<unsigned char>(reinterpret_cast<const unsigned char*>(s.data()),
                                                 s.size());
  };
  std::sort(token_ids_.begin(), token_ids_.end(), [&](int32_t a, int32_t b) {
    return view(a) < view(b) || (view(a) == view(b) && a < b);
  });
  nodes_.push_back(Node{});
  std::vector<int32_t> path{0};  // node index at each depth of the current prefix
  std::basic_string_view<unsigned char> prev;
  for (size_t k = 0; k < token_ids_.size(); ++k) {
    const auto s = view(token_ids_[k]);
    size_t lcp = 0;
    while (lcp < s.size() && lcp < prev.size() && s[lcp] == prev[lcp]) ++lcp;
    while (path.size() > lcp + 1) {  // close the nodes below the common prefix
      nodes_[static_cast<size_t>(path.back())].end = static_cast<int32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      Node n;
      n.byte = s[d];
      n.depth = static_cast<uint16_t>(d + 1);
      n.tok_begin = n.tok_end = static_cast<int32_t>(k);
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back(n);
    }
    Node& last = nodes_[static_cast<size_t>(path.back())];
    if (last.tok_end == last.tok_begin) last.tok_begin = static_cast<int32_t>(k);
    last.tok_end = static_cast<int32_t>(k) + 1;
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(s.size()));
    prev = s;
  }
  while (!path.empty()) {
    nodes_[static_cast<size_t>(path.back())].end = static_cast<int32_t>(nodes_.size());
    path.pop_back();
  }
}

}  // namespace syv::grammar
