#include "model/workspace.h"

#include "core/check.h"

namespace syv {

void Workspace::reserve(int64_t total) {
  reserved_ = false;
  if (total <= 0) return;  // ends the reservation
  if (total > capacity()) buffer_ = backend_.allocate(static_cast<size_t>(total));
  reserved_ = true;
}

void Workspace::begin(int64_t total) {
  if (total > capacity()) {
    SYV_CHECK(!reserved_) << owner_ << " forward needs " << total
                          << " bytes of activations, more than reserve()d (" << capacity()
                          << "): buffers a captured CUDA graph uses would move";
    buffer_ = DeviceBuffer();  // free first: the old and new buffers need not coexist
    buffer_ = backend_.allocate(static_cast<size_t>(total));
  }
  limit_ = total;
  offset_ = 0;
}

Tensor Workspace::take(DType dtype, std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const int64_t b = bytes(dtype, n);
  SYV_CHECK(offset_ + b <= limit_)
      << owner_ << " workspace: a tensor of " << b << " bytes at offset " << offset_
      << " exceeds the " << limit_ << " bytes the forward's size function gave";
  Tensor t(static_cast<char*>(buffer_.data()) + offset_, dtype, dims);
  offset_ += b;
  return t;
}

}  // namespace syv
