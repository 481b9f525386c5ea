// The @qwen-code/qwen-code coding agent against `syv serve` (issue 22's last client): one
// non-interactive prompt on Node 22 from npm, its tool round trip forced by a loopback proxy that
// replaces syv's first reply with a read_file call (tests/e2e/qwen_code_client/). The model is
// the trained models/tiny-dense, not the demo model: qwen-code refuses a reply without visible
// text, which the demo model's noise gives, and tiny-dense always writes (Python-looking) text.
// qwen-code's prompt, cut down by its settings to one core tool and a short system prompt, is
// about 1,400 tokens: inside tiny-dense's 4,096-token window.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>

#include "e2e/npm_client.h"
#include "e2e/serve_process.h"

namespace syv::testing {
namespace {

const std::string kTinyDense = std::string(SYV_SOURCE_DIR) + "/models/tiny-dense";
constexpr const char* kKey = "sk-e2e-qwen-code-0123456789abcdef";
constexpr int kContext = 4096;  // tiny-dense's max_position_embeddings, syv's --max-model-len

TEST(QwenCodeAgent, ToolRoundTripForcedByTheProxyAndAnsweredBySyv) {
  signal(SIGPIPE, SIG_IGN);
  ServerProcess server(
      {"serve", "--model", kTinyDense, "--port", "0", "--api-key", kKey, "--served-model-name",
       "tiny-dense", "--device", "cpu", "--max-model-len", std::to_string(kContext),
       "--kv-cache-mb", "32", "--max-num-seqs", "4", "--host-cache-gb", "0"},
      "e2e_qwen_code.log");
  const std::string port =
      server.wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))", std::chrono::seconds(120));
  ASSERT_FALSE(port.empty()) << server.log();
  ASSERT_TRUE(wait_ready(std::stoi(port), kKey, std::chrono::seconds(120))) << server.log();
  // qwen-code's HOME and project folder, outside the checkout (inside a git repository qwen-code
  // puts its branch, status and last commits into the prompt): one per build folder, emptied and
  // filled by each run, where the run's requests, replies and output stay for a reader.
  std::string name = "syv-e2e-qwen-code" + std::string(SYV_BINARY_DIR);
  std::replace(name.begin(), name.end(), '/', '_');
  const std::string work_dir = (std::filesystem::temp_directory_path() / name).string();
  run_npm_client("qwen_code_client", "@qwen-code/qwen-code", 6,
                 {std::stoi(port),
                  kKey,
                  "tiny-dense",
                  {{"SYV_WORK_DIR", work_dir}, {"SYV_CONTEXT", std::to_string(kContext)}}});
}

}  // namespace
}  // namespace syv::testing
