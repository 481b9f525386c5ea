// Hopper tensor maps for the kernels that load tiles by TMA (fp8_skinny_gemm.cu's weights,
// moe_wgmma.cu's experts, prefill attention's paged K/V): cuTensorMapEncodeTiled through the
// runtime's driver entry point, each map encoded once and cached.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace syv::cuda {

// The map of a row-major [rows, cols] matrix of `type` elements (elem_bytes each; rows
// cols * elem_bytes bytes apart, a multiple of 16; data 16-byte aligned) read in boxes of
// box_rows x box_cols elements with the 128-byte swizzle (wgmma's shared-memory layout; box_cols *
// elem_bytes <= 128), L2 promotion of 256 bytes, reads past either end zero-filled. Cached by
// (current device, data, type, shape, box). Stops naming `what` where the driver refuses it.
CUtensorMap tensor_map_2d(const void* data, CUtensorMapDataType type, int elem_bytes, int64_t rows,
                          int64_t cols, uint32_t box_rows, uint32_t box_cols, const char* what);

// The map of a row-major [rows, heads, cols] array read one head at a time: boxes of box_rows x
// box_cols elements of one head (box coordinates (col, head, row)), the same swizzle, promotion
// and fill as tensor_map_2d (prefill attention's paged K/V cache [pages * page_size, Hk, D]).
CUtensorMap tensor_map_heads(const void* data, CUtensorMapDataType type, int elem_bytes,
                             int64_t rows, int64_t heads, int64_t cols, uint32_t box_rows,
                             uint32_t box_cols, const char* what);

// The calling thread's current CUDA device (0-63: the caches of per-device facts index by it).
int current_device();

}  // namespace syv::cuda
