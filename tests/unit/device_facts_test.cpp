// The device the server names in /metrics (backend/device_facts.h): /proc/cpuinfo's model name and
// /proc/meminfo's MemTotal parsed from fixed texts; the CPU backend's kind. (The values this
// machine reports are not asserted: they depend on the machine.)
#include <gtest/gtest.h>

#include "backend/available_memory.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device_facts.h"

namespace syv {
namespace {

TEST(DeviceFacts, ParsesTheFirstModelName) {
  const std::string cpuinfo =
      "processor\t: 0\n"
      "vendor_id\t: GenuineIntel\n"
      "model\t\t: 143\n"
      "model name\t: Intel(R) Xeon(R) Platinum 8480+  \n"
      "\n"
      "processor\t: 1\n"
      "model name\t: Another name\n";
  EXPECT_EQ(parse_cpuinfo_model_name(cpuinfo), "Intel(R) Xeon(R) Platinum 8480+");
}

TEST(DeviceFacts, NoModelNameIsUnknown) {
  // An ARM kernel's /proc/cpuinfo: no "model name" line ("model" alone is not it).
  EXPECT_EQ(parse_cpuinfo_model_name("processor\t: 0\nCPU implementer\t: 0x41\nmodel\t: 1\n"),
            std::nullopt);
  EXPECT_EQ(parse_cpuinfo_model_name("model name\t:   \n"), std::nullopt);
  EXPECT_EQ(parse_cpuinfo_model_name(""), std::nullopt);
}

TEST(DeviceFacts, ParsesMemTotal) {
  const std::string meminfo =
      "MemTotal:       131072000 kB\n"
      "MemFree:         1000000 kB\n"
      "MemAvailable:   65536000 kB\n";
  EXPECT_EQ(parse_meminfo_field(meminfo, "MemTotal"), int64_t{131072000} * 1024);
  EXPECT_EQ(parse_meminfo_field(meminfo, "MemFree"), int64_t{1000000} * 1024);
  EXPECT_EQ(parse_meminfo_field(meminfo, "SwapTotal"), std::nullopt);
  EXPECT_EQ(parse_meminfo_field("XMemTotal: 5 kB\n", "MemTotal"), std::nullopt);
}

TEST(DeviceFacts, TheCpuBackendIsNamedCpu) {
  CpuBackend cpu;
  const DeviceFacts facts = cpu.device_facts();
  EXPECT_EQ(facts.backend, "cpu");
  EXPECT_EQ(facts.index, -1);
}

}  // namespace
}  // namespace syv
