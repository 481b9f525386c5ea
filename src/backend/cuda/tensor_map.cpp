#include "backend/cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"

namespace syv::cuda {

int current_device() {
  int dev = 0;
  SYV_CUDA_CHECK(cudaGetDevice(&dev));
  SYV_CHECK(dev >= 0 && dev < 64) << "CUDA device " << dev << " (64 at most)";
  return dev;
}

CUtensorMap tensor_map_2d(const void* data, CUtensorMapDataType type, int elem_bytes, int64_t rows,
                          int64_t cols, uint32_t box_rows, uint32_t box_cols, const char* what) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    SYV_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                    cudaEnableDefault, &found));
    SYV_CHECK(fn != nullptr && found == cudaDriverEntryPointSuccess)
        << "the CUDA driver has no cuTensorMapEncodeTiled";
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  using Key = std::tuple<int, const void*, int, int64_t, int64_t, uint32_t, uint32_t>;
  static std::mutex mu;
  static std::map<Key, CUtensorMap> maps;
  const Key key{current_device(), data, static_cast<int>(type), rows, cols, box_rows, box_cols};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = maps.find(key); it != maps.end()) return it->second;
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * elem_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r =
      encode(&map, type, 2, const_cast<void*>(data), dims, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SYV_CHECK(r == CUDA_SUCCESS) << "cuTensorMapEncodeTiled failed (" << static_cast<int>(r)
                               << ") for " << what << " [" << rows << ", " << cols << "]";
  return maps.emplace(key, map).first->second;
}

}  // namespace syv::cuda
