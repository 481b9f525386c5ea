#include "backend/backend.h"

namespace syv {

DeviceBuffer::~DeviceBuffer() {
  if (backend_ && data_) backend_->release(data_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (backend_ && data_) backend_->release(data_);
    backend_ = other.backend_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.backend_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

}  // namespace syv
