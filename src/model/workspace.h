// The activation workspace of one model: a single backend buffer that forward() carves tensors
// out of, front to back (a bump allocator with marks, so one layer's scratch is reused by the
// next). Every model of the kit (model/blocks.h) sizes it the same way: it computes the bytes a
// forward of T tokens / R logits rows takes (each block's *_bytes() function, Workspace::bytes()
// for each tensor), begin()s the forward with that size, and take()s tensors in any order within
// it. A take() beyond the size begun is a CHECK failure, so a size function that forgets a tensor
// fails on the first forward, not in production.
//
// CUDA graphs: after reserve(bytes) the buffer never moves, and begin() of a larger forward is a
// CHECK failure; the offsets of the tensors a forward takes follow only its T and R, so a graph
// replayed at the shape it was captured at reads and writes the same addresses.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "backend/backend.h"

namespace syv {

class Workspace {
 public:
  static constexpr int64_t kAlign = 256;  // bytes; every take() starts on this boundary

  // Bytes one tensor of `numel` elements of `dtype` takes (rounded up to kAlign, at least kAlign).
  static int64_t bytes(DType dtype, int64_t numel) {
    const int64_t b = numel * static_cast<int64_t>(dtype_size(dtype));
    return b <= kAlign ? kAlign : (b + kAlign - 1) / kAlign * kAlign;
  }

  Workspace(Backend& backend, std::string owner) : backend_(backend), owner_(std::move(owner)) {}

  // Allocates `total` bytes now and fixes the buffer (reserve(0) ends the reservation; the
  // buffer stays).
  void reserve(int64_t total);
  bool reserved() const { return reserved_; }
  int64_t capacity() const { return static_cast<int64_t>(buffer_.bytes()); }

  // Starts a forward that takes at most `total` bytes: grows the buffer when needed (CHECK
  // failure when reserved) and rewinds to the front.
  void begin(int64_t total);
  // The next tensor, contiguous, at the current offset.
  Tensor take(DType dtype, std::initializer_list<int64_t> dims);
  // Offsets to rewind to: scratch taken after mark() is reused after release(mark).
  int64_t mark() const { return offset_; }
  void release(int64_t mark) { offset_ = mark; }

 private:
  Backend& backend_;
  std::string owner_;  // for messages: "qwen3", "qwen3_5"
  DeviceBuffer buffer_;
  bool reserved_ = false;
  int64_t limit_ = 0;   // bytes begin() allowed
  int64_t offset_ = 0;  // next free byte
};

}  // namespace syv
