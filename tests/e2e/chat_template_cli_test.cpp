// `syv chat-template` end to end: prints exactly the transformers render of the golden cases, lets
// chat_template.jinja override tokenizer_config.json, and reports template errors with positions.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::string kTokenizerDir = SYV_SOURCE_DIR "/third_party/qwen3-tokenizer";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

struct CliResult {
  int status;
  std::string out;
};

CliResult run(const std::string& args) {
  std::string cmd = std::string(SYV_BIN) + " chat-template " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

class ChatTemplateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kTokenizerDir + "/tokenizer.json"))
      GTEST_SKIP() << "run `make tokenizer` first";
    dir_ = fs::temp_directory_path() / ("syv_chat_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(ChatTemplateCli, PrintsTheTransformersRenderExactly) {
  ojson cases = ojson::parse(read(SYV_SOURCE_DIR "/tests/fixtures/chat/cases.json"));
  int checked = 0;
  for (const auto& c : cases["cases"]) {
    // One case per CLI option (tools file, template kwargs, with and without the generation
    // prompt): each run loads the tokenizer, which is slow in Debug builds.
    static const std::set<std::string> chosen = {
        "qwen3/tools_system_user/gen", "qwen3/enable_thinking_false/gen",
        "qwen3/multi_step_tools/nogen", "qwen3/unicode_content/gen"};
    if (!chosen.count(c["name"].get<std::string>())) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    write(dir_ / "messages.json", c["messages"].dump());
    std::string args =
        "--model " + kTokenizerDir + " --messages-file " + (dir_ / "messages.json").string();
    if (!c["tools"].is_null()) {
      write(dir_ / "tools.json", c["tools"].dump());
      args += " --tools-file " + (dir_ / "tools.json").string();
    }
    if (c["add_generation_prompt"].get<bool>()) args += " --add-generation-prompt";
    if (!c["kwargs"].empty()) {
      write(dir_ / "kwargs.json", c["kwargs"].dump());
      args += " --template-kwargs \"$(cat " + (dir_ / "kwargs.json").string() + ")\"";
    }
    CliResult r = run(args);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(r.out, c["expected"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST_F(ChatTemplateCli, ChatTemplateJinjaTakesPrecedence) {
  fs::copy_file(kTokenizerDir + "/tokenizer.json", dir_ / "tokenizer.json");
  fs::copy_file(kTokenizerDir + "/tokenizer_config.json", dir_ / "tokenizer_config.json");
  write(dir_ / "chat_template.jinja",
        "{% for m in messages %}[{{ m.role }}]{% endfor %}{{ eos_token }}\n");
  write(dir_ / "m.json", R"([{"role": "user", "content": "x"}])");
  CliResult r = run("--model " + dir_.string() + " --messages-file " + (dir_ / "m.json").string());
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "[user]<|im_end|>");  // no newline added (and the template's last one dropped,
                                         // as jinja2 does)
}

TEST_F(ChatTemplateCli, ErrorsAreReported) {
  fs::copy_file(kTokenizerDir + "/tokenizer.json", dir_ / "tokenizer.json");
  write(dir_ / "chat_template.jinja", "ok\n{% for m in messages %}{{ m.role + 1 }}{% endfor %}");
  write(dir_ / "m.json", R"([{"role": "user", "content": "x"}])");
  CliResult r = run("--model " + dir_.string() + " --messages-file " + (dir_ / "m.json").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("chat template line 2, column 34: can only concatenate str"),
            std::string::npos)
      << r.out;
  r = run("--model " + dir_.string() + " --messages-file " + (dir_ / "missing.json").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("missing.json: cannot read the file"), std::string::npos) << r.out;
  r = run("--model " + dir_.string() + " --messages-file " + (dir_ / "m.json").string() +
          " --template-kwargs '[1]'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--template-kwargs: expected a JSON object"), std::string::npos) << r.out;
}

}  // namespace
