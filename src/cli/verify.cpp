// `syv verify`: PASS/FAIL lines for what a deployment must do, then `N passed, M failed`; exit
// code 0 only when every check passed. Against a running server (--url, --api-key), or against
// one it starts itself (--model DIR: `syv serve` on a free loopback port with a random key,
// stopped with SIGTERM at the end, which is checked too). The checks: cli/verify_checks.h.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/command.h"
#include "cli/openai_client.h"
#include "cli/preset.h"
#include "cli/serve_child.h"
#include "cli/verify_checks.h"

namespace syv::cli {
namespace {

struct Options {
  std::string url, api_key, model_dir, device = "auto", serve_args;
  int startup_timeout_s = 600;
};

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool wait_healthy(const OpenAiClient& client, const ServeChild& child, std::chrono::seconds t) {
  const auto deadline = std::chrono::steady_clock::now() + t;
  while (std::chrono::steady_clock::now() < deadline && child.running()) {
    if (client.get("/health").status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The serve arguments without the flags (and their values) whose name starts with one of
// `prefixes` (every such flag of serve takes a value).
std::vector<std::string> without_flags(const std::vector<std::string>& args,
                                       std::initializer_list<const char*> prefixes) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool drop = false;
    for (const char* p : prefixes) drop |= a.rfind(p, 0) == 0;
    if (drop && a.find('=') == std::string::npos) {
      ++i;  // its value
    } else if (!drop) {
      out.push_back(a);
    }
  }
  return out;
}

// Without speculative decoding's flags: --speculative-*, --num-speculative-*, --ngram-* and
// --draft-* (--draft-model alone is refused by serve).
std::vector<std::string> without_speculation(const std::vector<std::string>& args) {
  return without_flags(args, {"--speculative-", "--num-speculative-", "--ngram-", "--draft-"});
}

// With a KV pool of `mb` MiB in place of whatever sized it (and of a model length it may not hold).
std::vector<std::string> with_small_pool(const std::vector<std::string>& args, int64_t mb) {
  std::vector<std::string> out =
      without_flags(args, {"--kv-cache-mb", "--num-pages", "--gpu-memory-utilization",
                           "--gpu-memory-gib", "--max-model-len"});
  out.insert(out.end(), {"--kv-cache-mb", std::to_string(mb)});
  return out;
}

// `args` with a `--preset NAME` replaced by the flags it resolves to for the folder (those the
// command line does not give: explicit flags win, as in serve), so that speculation a preset turns
// on is seen and can be left out of the second server. Unchanged without --preset.
Result<std::vector<std::string>> with_preset_expanded(const std::vector<std::string>& args,
                                                      const std::string& model_dir) {
  std::vector<std::string> out;
  std::string name;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--preset" && i + 1 < args.size()) {
      name = args[++i];
    } else if (args[i].rfind("--preset=", 0) == 0) {
      name = args[i].substr(9);
    } else {
      out.push_back(args[i]);
    }
  }
  if (name.empty()) return args;
  SYV_ASSIGN_OR_RETURN(Preset preset, resolve_preset(name, model_dir));
  for (const PresetFlag& f : preset.flags) {
    bool given = false;
    for (const std::string& a : out) given |= a == f.flag || a.rfind(f.flag + "=", 0) == 0;
    if (!given) out.insert(out.end(), {f.flag, f.value});
  }
  return out;
}

const std::vector<std::string> kSpecPrompts = {"def quicksort(arr):", "1, 2, 3, 4, 5,",
                                               "The quick brown fox"};

int summary(const Verifier& v) {
  if (v.skipped() > 0) {
    std::printf("%d passed, %d failed, %d skipped\n", v.passed(), v.failed(), v.skipped());
  } else {
    std::printf("%d passed, %d failed\n", v.passed(), v.failed());
  }
  std::fflush(stdout);
  return v.failed() == 0 ? 0 : 1;
}

// Starts a server; on failure records it as a failed check.
bool start(ServeChild& child, const Options& o, const std::vector<std::string>& args, Verifier& v,
           const std::string& what) {
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = child.start(o.model_dir, args, std::chrono::seconds(o.startup_timeout_s));
      !st.ok()) {
    v.check("server: " + what + " starts", false, st.message());
    return false;
  }
  Result<OpenAiClient> client = OpenAiClient::create(child.url(), child.api_key());
  if (!client.ok() || !wait_healthy(*client, child, std::chrono::seconds(o.startup_timeout_s))) {
    v.check("server: " + what + " starts", false,
            "not ready (GET /health) in time:\n" + child.log_tail(20));
    return false;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char detail[128];
  std::snprintf(detail, sizeof detail, "ready in %.1f s", s);
  v.check("server: " + what + " starts at " + child.url(), true, detail);
  return true;
}

int run_with_model(const Options& o) {
  std::vector<std::string> args = split_words(o.serve_args);
  args.insert(args.end(), {"--device", o.device});
  Verifier v;
  std::vector<std::string> spec_texts;
  auto expanded = with_preset_expanded(args, o.model_dir);
  if (!expanded.ok()) return fail(expanded.message());
  const bool speculation = without_speculation(*expanded).size() != expanded->size();
  {
    ServeChild child;
    std::fprintf(stderr, "syv verify: starting syv serve --model %s %s\n", o.model_dir.c_str(),
                 o.serve_args.c_str());
    if (!start(child, o, args, v, "syv serve")) return summary(v);
    Result<OpenAiClient> client = OpenAiClient::create(child.url(), child.api_key());
    v.set_client(*client);
    v.defer_offload_to_a_small_pool(true);
    v.run_all();
    if (speculation) spec_texts = v.greedy_texts(kSpecPrompts, 32);
    const int rc = child.stop(std::chrono::seconds(60));
    v.check("shutdown: SIGTERM drains and exits 0", rc == 0,
            rc == 0 ? "" : "exit status " + std::to_string(rc) + "\n" + child.log_tail(10));
  }
  if (const int64_t mb = v.small_pool_mb(); mb > 0) {
    // The pool was too large for the offload check to evict: a second server with a small one.
    ServeChild small;
    const std::string what = "syv serve with a " + std::to_string(mb) + " MiB KV pool";
    if (start(small, o, with_small_pool(*expanded, mb), v, what)) {
      Result<OpenAiClient> client = OpenAiClient::create(small.url(), small.api_key());
      v.set_client(*client);
      v.offload_check("a second server with a " + std::to_string(mb) + " MiB KV pool");
      small.stop(std::chrono::seconds(60));
    }
  }
  if (speculation) {
    // Speculative decoding must not change greedy output: the same prompts on a second server
    // started without it.
    ServeChild plain;
    if (start(plain, o, without_speculation(*expanded), v, "syv serve without speculation")) {
      Result<OpenAiClient> client = OpenAiClient::create(plain.url(), plain.api_key());
      v.set_client(*client);
      const std::vector<std::string> plain_texts = v.greedy_texts(kSpecPrompts, 32);
      int differ = 0;
      for (size_t i = 0; i < kSpecPrompts.size(); ++i)
        differ += plain_texts[i].empty() || plain_texts[i] != spec_texts[i];
      v.check("speculation: greedy output with it = without it", differ == 0,
              std::to_string(kSpecPrompts.size()) + " prompts x 32 tokens, " +
                  std::to_string(differ) + " differ");
      plain.stop(std::chrono::seconds(60));
    }
  }
  return summary(v);
}

int run(Options o) {
  if (o.url.empty() == o.model_dir.empty())
    return fail("give either --url (a running server) or --model DIR (one to start)");
  if (!o.model_dir.empty()) return run_with_model(o);
  if (o.api_key.empty()) {
    if (const char* env = std::getenv("SYV_API_KEY")) o.api_key = env;
  }
  Result<OpenAiClient> client = OpenAiClient::create(o.url, o.api_key);
  if (!client.ok()) return fail(client.message());
  Verifier v;
  v.set_client(*client);
  v.run_all();
  return summary(v);
}

CommandRegistration reg{
    "verify",
    "Check a server (--url) or a model folder served for the occasion (--model): PASS/FAIL per "
    "check, exit 0 when all pass",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.footer(
          "Checks: /health and /v1/models, the build, device, KV pool and memory plan in\n"
          "/metrics, 401 on every route without and with a wrong key, chat and completions,\n"
          "a forced tool call and its round trip, the <think> split into reasoning_content\n"
          "with the model's template, the SSE format, stop strings, cached tokens on a resend,\n"
          "/metrics names, batched = sequential greedy output, a prompt served back from the\n"
          "host tier = its first greedy output (on a pool of up to 32,768 tokens), an\n"
          "OpenAI-shaped 400 naming the field, a disconnected stream leaving the server serving\n"
          "with its pages freed. With --model also the start, the SIGTERM exit, the offload\n"
          "check on a second server with a small KV pool when the first one's is too large\n"
          "to evict, and, when --serve-args turns speculative decoding on, greedy output\n"
          "equal to a second server's without it.\n"
          "The server should be otherwise idle (docs/benchmarking.md).");
      CLI::Option* url = app.add_option("--url", o->url, "A running server: http://HOST:PORT");
      app.add_option("--api-key", o->api_key, "Its key (default: $SYV_API_KEY)")->needs(url);
      CLI::Option* model =
          app.add_option("--model", o->model_dir,
                         "Start `syv serve` on this folder (free loopback port, random key), "
                         "check it, stop it")
              ->excludes(url);
      app.add_option("--device", o->device, "--model: the server's --device (auto, cpu, cuda)")
          ->needs(model)
          ->capture_default_str();
      app.add_option("--serve-args", o->serve_args,
                     "--model: more flags for syv serve, one string (\"--preset interactive\")")
          ->needs(model);
      app.add_option("--startup-timeout", o->startup_timeout_s,
                     "--model: seconds the server may take to become ready")
          ->needs(model)
          ->capture_default_str();
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
