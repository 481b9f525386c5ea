#include "backend/cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"

namespace syv::cuda {

int current_device() {
  int dev = 0;
  SYV_CUDA_CHECK(cudaGetDevice(&dev));
  SYV_CHECK(dev >= 0 && dev < 64) << "CUDA device " << dev << " (64 at most)";
  return dev;
}

namespace {

// cuTensorMapEncodeTiled of a rank-`rank` map (dims innermost first, strides in bytes of dims 1
// ...), 128-byte swizzle, cached by (current device, data, type, dims, strides, box).
CUtensorMap encode_cached(const void* data, CUtensorMapDataType type, int rank,
                          const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                          const char* what) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    SYV_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                    cudaEnableDefault, &found));
    SYV_CHECK(fn != nullptr && found == cudaDriverEntryPointSuccess)
        << "the CUDA driver has no cuTensorMapEncodeTiled";
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  std::vector<uint64_t> key = {static_cast<uint64_t>(current_device()),
                               reinterpret_cast<uintptr_t>(data), static_cast<uint64_t>(type),
                               static_cast<uint64_t>(rank)};
  for (int i = 0; i < rank; ++i) key.insert(key.end(), {dims[i], box[i]});
  for (int i = 0; i + 1 < rank; ++i) key.push_back(strides[i]);
  static std::mutex mu;
  static std::map<std::vector<uint64_t>, CUtensorMap> maps;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = maps.find(key); it != maps.end()) return it->second;
  CUtensorMap map{};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r =
      encode(&map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(data), dims, strides, box,
             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  std::string shape;
  for (int i = rank - 1; i >= 0; --i) shape += std::to_string(dims[i]) + (i ? ", " : "");
  SYV_CHECK(r == CUDA_SUCCESS) << "cuTensorMapEncodeTiled failed (" << static_cast<int>(r)
                               << ") for " << what << " [" << shape << "]";
  return maps.emplace(std::move(key), map).first->second;
}

}  // namespace

CUtensorMap tensor_map_2d(const void* data, CUtensorMapDataType type, int elem_bytes, int64_t rows,
                          int64_t cols, uint32_t box_rows, uint32_t box_cols, const char* what) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * elem_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  return encode_cached(data, type, 2, dims, strides, box, what);
}

CUtensorMap tensor_map_heads(const void* data, CUtensorMapDataType type, int elem_bytes,
                             int64_t rows, int64_t heads, int64_t cols, uint32_t box_rows,
                             uint32_t box_cols, const char* what) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols) * elem_bytes,
                                 static_cast<cuuint64_t>(heads * cols) * elem_bytes};
  const cuuint32_t box[3] = {box_cols, 1, box_rows};
  return encode_cached(data, type, 3, dims, strides, box, what);
}

}  // namespace syv::cuda
