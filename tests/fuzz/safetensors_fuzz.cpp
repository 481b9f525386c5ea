// libFuzzer target: SafetensorsFile::parse on arbitrary bytes. Every accepted tensor must lie
// inside the image; reading its bytes lets ASan catch any offset the validator let through.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = syv::SafetensorsFile::parse(data, size, "fuzz.safetensors");
  if (!file.ok()) return 0;
  uint64_t sum = 0;
  for (const auto& [name, t] : (*file)->tensors()) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (p < data || p + t.bytes > data + size) std::abort();
    if (static_cast<int64_t>(t.bytes) !=
        t.numel() * static_cast<int64_t>(syv::dtype_size(t.dtype))) {
      std::abort();
    }
    for (size_t i = 0; i < t.bytes; ++i) sum += p[i];
  }
  volatile uint64_t sink = sum;
  (void)sink;
  return 0;
}
