// The start-up memory check (backend/available_memory.h): /proc/meminfo parsing, and the pure
// decision with both numbers in its message. (The whole path, prepare_model() refusing weights
// that cannot fit, is in model_prepare_test; `syv serve` refusing before "listening on" is in
// e2e_startup_checks_test.)
#include <gtest/gtest.h>

#include "backend/available_memory.h"
#include "backend/backend.h"

namespace syv {
namespace {

TEST(AvailableMemory, ParsesMemAvailable) {
  const std::string meminfo =
      "MemTotal:       131072000 kB\n"
      "MemFree:         1000000 kB\n"
      "MemAvailable:   65536000 kB\n"
      "Buffers:          12345 kB\n";
  EXPECT_EQ(parse_meminfo_available(meminfo), int64_t{65536000} * 1024);
  EXPECT_EQ(parse_meminfo_available("MemAvailable: 0 kB"), 0);
}

TEST(AvailableMemory, RefusesWhatDoesNotParse) {
  EXPECT_EQ(parse_meminfo_available(""), std::nullopt);
  EXPECT_EQ(parse_meminfo_available("MemTotal: 100 kB\nMemFree: 5 kB\n"), std::nullopt);
  EXPECT_EQ(parse_meminfo_available("MemAvailable: kB\n"), std::nullopt);
  EXPECT_EQ(parse_meminfo_available("MemAvailable: 12 MB\n"), std::nullopt);
  EXPECT_EQ(parse_meminfo_available("XMemAvailable: 12 kB\n"), std::nullopt);  // not a line start
  EXPECT_EQ(parse_meminfo_available("MemAvailable: 99999999999999999999 kB\n"), std::nullopt);
}

TEST(AvailableMemory, ThisMachineAndTheCpuBackend) {
  const AvailableMemory host = host_available_memory();
  EXPECT_GT(host.bytes, 0) << "/proc/meminfo has MemAvailable on every supported kernel";
  EXPECT_NE(host.where.find("MemAvailable"), std::string::npos);
  const AvailableMemory cpu = make_cpu_backend()->available_memory();
  EXPECT_NE(cpu.where.find("MemAvailable"), std::string::npos)
      << "the CPU backend uses host memory";
  EXPECT_GT(cpu.bytes, 0);
}

TEST(WeightsFit, FitsOrUnknownPasses) {
  const AvailableMemory avail{16'000'000'000, "host memory (MemAvailable in /proc/meminfo)"};
  EXPECT_TRUE(check_weights_fit(0, avail, "w").ok());
  EXPECT_TRUE(check_weights_fit(16'000'000'000, avail, "w").ok()) << "exactly equal fits";
  EXPECT_TRUE(check_weights_fit(-1, avail, "w").ok()) << "unknown weight bytes";
  EXPECT_TRUE(check_weights_fit(INT64_MAX, AvailableMemory{}, "w").ok()) << "unknown memory";
}

TEST(WeightsFit, TooLargeNamesBothNumbersAndWhatToDo) {
  const AvailableMemory avail{12'345'678'901, "free memory on CUDA device 0 (NVIDIA H200)"};
  const Status st = check_weights_fit(16'380'000'000, avail, "the weights of /models/Qwen3-8B");
  ASSERT_FALSE(st.ok());
  const std::string& m = st.message();
  for (const char* part :
       {"the weights of /models/Qwen3-8B", "16.38 GB", "16380000000 bytes",
        "free memory on CUDA device 0 (NVIDIA H200)", "12.35 GB", "12345678901 bytes",
        "nothing was loaded", "smaller model", "another device (--device)"}) {
    EXPECT_NE(m.find(part), std::string::npos) << m << "\n   lacks: " << part;
  }
  EXPECT_FALSE(check_weights_fit(1, AvailableMemory{0, "x"}, "w").ok()) << "no memory at all";
}

TEST(WeightsFit, FormatsSizes) {
  EXPECT_EQ(format_bytes(900), "900 bytes");
  EXPECT_EQ(format_bytes(512'000'000), "512.0 MB");
  EXPECT_EQ(format_bytes(16'384'000'000), "16.38 GB");
}

}  // namespace
}  // namespace syv
