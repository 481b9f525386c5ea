// The vocabulary as a byte trie, for token masks (token_masks.h): tokens that share a prefix
// share its nodes, so a mask computation steps the grammar once per node, not once per byte of
// every token, and drops a whole subtree as soon as its prefix is refused.
//
// Layout: nodes in depth-first preorder (nodes()[0] is the root, the empty prefix); a node's
// subtree is the index range [i, end). Walking it is a loop over an array: on a refused prefix,
// jump to `end`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace syv::grammar {

class TokenTrie {
 public:
  struct Node {
    uint8_t byte = 0;       // the byte this node adds to its parent's prefix
    uint16_t depth = 0;     // prefix length (root 0)
    int32_t end = 0;        // one past the last node of the subtree
    int32_t tok_begin = 0;  // tokens whose bytes end here: token_ids()[tok_begin, tok_end)
    int32_t tok_end = 0;
  };

  // token_bytes[id] is token id's byte string; an empty string marks a token no grammar may
  // produce (special tokens, ids without bytes). Tokens longer than 65535 bytes are left out.
  explicit TokenTrie(std::vector<std::string> token_bytes);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int32_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;  // ids sorted by their bytes
  int32_t max_depth_ = 0;
};

}  // namespace syv::grammar
