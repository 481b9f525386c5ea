// What a backend computes on, for the server's syv_device_info series (docs/server.md
// "Metrics"): the device's name and its total memory. Backend::device_facts() answers it: this
// machine by default (the CPU backend's "device" is host memory and the host's processors), the
// CUDA backend its GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace syv {

struct DeviceFacts {
  std::string backend;        // the kind of backend: "cpu", "cuda"
  int32_t index = -1;         // the device's index among its kind (CUDA's ordinal); -1 = none
  std::string name;           // "NVIDIA H200", "AMD EPYC 9654 96-Core Processor"; "" = unknown
  int64_t memory_bytes = -1;  // total memory of the device (not what is free); -1 = unknown
};

// The first "model name" line of /proc/cpuinfo's text, its value trimmed; nullopt when there is
// none (some ARM kernels print no such line).
std::optional<std::string> parse_cpuinfo_model_name(std::string_view cpuinfo);

// This machine: /proc/cpuinfo's model name and /proc/meminfo's MemTotal (each unknown when its
// file cannot be read or has no such line); `backend` and `index` left for the caller.
DeviceFacts host_device_facts();

}  // namespace syv
