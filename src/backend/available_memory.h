// How much memory a backend can still allocate, and the start-up check that the weights fit in it
// (refused before anything is allocated, with both numbers and what to do).
//
// Backend::available_memory() answers it: host memory (MemAvailable in /proc/meminfo) by default,
// which is where the CPU backend allocates; the CUDA backend answers with cudaMemGetInfo's free
// bytes on its device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace syv {

struct AvailableMemory {
  int64_t bytes = -1;  // -1: unknown (then nothing is refused)
  std::string where;   // for messages: "host memory (MemAvailable in /proc/meminfo)",
                       // "CUDA device 0 (NVIDIA H200), free"
};

// The line `key` of /proc/meminfo's text ("MemAvailable:   12345 kB" for key "MemAvailable"), in
// bytes; nullopt when there is none or it does not parse.
std::optional<int64_t> parse_meminfo_field(std::string_view meminfo, std::string_view key);
// Its MemAvailable line (nullopt on kernels before 3.14, which have none).
inline std::optional<int64_t> parse_meminfo_available(std::string_view meminfo) {
  return parse_meminfo_field(meminfo, "MemAvailable");
}

// MemAvailable of this machine (bytes = -1 when /proc/meminfo cannot be read).
AvailableMemory host_available_memory();

// "16.38 GB" (decimal), "512.0 MB", "900 bytes": sizes in messages.
std::string format_bytes(int64_t bytes);

// Ok when `weight_bytes` (what the backend will hold for the weights, in its own dtype) fit in
// `available`, or when either is unknown (< 0). Otherwise an error naming both numbers, where
// the memory is, `what` (e.g. "the weights of /models/Qwen3-8B (bf16)"), and what to do: a
// smaller model, another device, or freeing memory. Pure: no system calls.
Status check_weights_fit(int64_t weight_bytes, const AvailableMemory& available,
                         const std::string& what);

}  // namespace syv
