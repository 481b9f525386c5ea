// A non-owning, contiguous, row-major view of backend memory (host memory for the CPU backend,
// device memory for CUDA). Owners are DeviceBuffers (backend.h).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "core/check.h"
#include "core/dtype.h"

namespace syv {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  int32_t ndim = 0;
  std::array<int64_t, 4> shape{};  // outermost first

  Tensor() = default;
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> dims) : data(data), dtype(dtype) {
    SYV_CHECK(dims.size() <= 4) << "tensor rank " << dims.size();
    for (int64_t d : dims) shape[ndim++] = d;
  }

  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }

  // Rows [begin, begin + count) of the outermost dimension, as a view.
  Tensor rows(int64_t begin, int64_t count) const {
    SYV_CHECK(begin >= 0 && begin + count <= shape[0])
        << begin << "+" << count << " of " << shape[0];
    Tensor t = *this;
    t.shape[0] = count;
    t.data = static_cast<char*>(data) + begin * (bytes() / (shape[0] ? shape[0] : 1));
    return t;
  }
  // Same bytes, another shape with the same element count.
  Tensor reshape(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, dims);
    SYV_CHECK_EQ(t.numel(), numel()) << "reshape";
    return t;
  }
};

}  // namespace syv
