// `syv serve`'s GPU memory flags where no GPU plans the pool (src/cli/kv_pool_plan.h): the CPU
// backend keeps --kv-cache-mb's pool and says that --gpu-memory-utilization / --gpu-memory-gib
// were not used (a flag is never silently ignored), and a --gpu-memory-gib that is not a positive
// number is refused naming the flag. (On a GPU the plan's "device G GiB (--gpu-memory-gib)" is
// checked by tools/device/sim24_check.sh.)
#include <gtest/gtest.h>

#include <string>

#include "e2e/cli_run.h"
#include "e2e/serve_process.h"

namespace syv::testing {
namespace {

TEST(GpuMemoryFlags, TheCpuBackendSaysTheyAreNotUsed) {
  ensure_demo_model();
  ServerProcess p({"serve", "--model", kDemoDir, "--port", "0", "--device", "cpu",
                   "--gpu-memory-gib", "24", "--gpu-memory-utilization", "0.5"},
                  "e2e_gpu_memory_flags.log");
  ASSERT_FALSE(p.wait_for_line(R"(syv: ready)", std::chrono::seconds(120)).empty()) << p.log();
  EXPECT_NE(p.log().find("--gpu-memory-utilization / --gpu-memory-gib: not used (the cpu "
                         "backend's pool is --kv-cache-mb)"),
            std::string::npos)
      << p.log();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(30)), 0);
}

TEST(GpuMemoryFlags, ANonPositiveGibIsRefusedByName) {
  ensure_demo_model();
  for (const char* value : {"0", "-3", "lots"}) {
    const auto [status, out] = run_command(std::string(SYV_BIN) + " serve --model " + kDemoDir +
                                               " --device cpu --port 0 --gpu-memory-gib " + value,
                                           /*with_stderr=*/true);
    EXPECT_NE(status, 0) << value << ": " << out;
    EXPECT_NE(out.find("--gpu-memory-gib"), std::string::npos) << value << ": " << out;
  }
}

}  // namespace
}  // namespace syv::testing
