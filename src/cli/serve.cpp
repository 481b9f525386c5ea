// `syv serve`: the OpenAI-compatible HTTP server (src/server/) in front of the engine thread.
//
// Start-up order: check the flags (keys, address) -> the backend (--device, as `syv logits` /
// `generate` pick it: cli/model_session.h) -> the start-up checks: the folder, config.json, the
// weight headers and whether the weights fit in the backend's free memory (model/prepare_model.h),
// tokenizer and chat template -> bind and listen (the port is ours from here: a second server
// fails before a long load; connections wait in the kernel's backlog, unanswered) -> load the
// weights -> start the engine (memory plan, KV pool, CUDA graph capture) -> one warm-up request
// -> accept connections, print `listening on`, ready. So every start-up failure (a check, the
// load, the plan, the engine, the warm-up) exits 1 without ever printing `listening on`, and a
// script that waits for that line finds a server that answers. Each phase logs its time.
// SIGTERM/SIGINT: new generation requests get 503, running ones finish (up to --drain-timeout;
// what is left then is aborted), then the engine and the listener stop and the process exits 0.
// A second SIGTERM/SIGINT during the drain aborts what is left at once (streams still end with
// finish_reason "abort" and [DONE]) and the process exits 1.
// A request that reaches a stopped engine gets 503 too (Status code kUnavailable).
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "backend/backend.h"
#include "cli/command.h"
#include "cli/engine_args.h"
#include "cli/kv_pool_plan.h"
#include "cli/model_session.h"
#include "cli/preset.h"
#include "cli/serve_facts.h"
#include "cli/tensor_parallel_cli.h"
#include "core/log.h"
#include "engine/engine.h"
#include "engine/engine_core.h"
#include "io/model_folder.h"
#include "model/model.h"
#include "model/prepare_model.h"
#include "server/auth.h"
#include "server/engine_bridge.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_routes.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

struct ServeOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::string public_routes;
  std::string allowed_origins;  // CORS: "" = none, "*", or comma-separated origins
  std::string served_model_name;
  std::string device = "auto";
  int tensor_parallel_size = 1;                // --tensor-parallel-size (cli/tensor_parallel_cli.h)
  bool host_embeddings = false;                // --host-embeddings (LoadOptions::host_embeddings)
  std::string quantized_activations = "auto";  // --quantized-activations
  std::string preset;  // --preset (cli/preset.h): applied to the flags before run_serve
  // Backend::set_batch_invariant.
  bool batch_invariant = false;
  EngineArgs engine;  // --page-size, --kv-cache-mb, --max-num-seqs, --max-model-len ...
  // On a GPU, the KV pool takes what this share of device memory leaves after the weights, the
  // activations and the runtime reserve, unless --kv-cache-mb or --num-pages says otherwise.
  double gpu_memory_utilization = 0.90;
  bool kv_cache_mb_given = false;
  double gpu_memory_gib = 0.0;    // 0: the device's total
  bool gpu_memory_given = false;  // --gpu-memory-utilization or --gpu-memory-gib given
  bool budget_given = false;      // --max-batched-tokens given or set by the preset
  int max_waiting = 256;
  int http_threads = 0;  // 0 = max_num_seqs + max_waiting + 16, at most 1024
  size_t max_body_bytes = 8u << 20;
  size_t max_json_values = server::kDefaultMaxJsonValues;
  size_t max_parse_memory_mb = server::kDefaultMaxParseMemoryMb;
  // The transport's limits (server/http_server.h; docs/server.md "Limits").
  static inline const server::HttpOptions http_defaults{};
  size_t max_header_bytes = http_defaults.limits.max_header_bytes;
  size_t max_header_count = http_defaults.limits.max_header_count;
  size_t max_uri_bytes = http_defaults.limits.max_uri_bytes;
  bool accept_compressed = false;
  int header_timeout_s = http_defaults.header_timeout_s;
  int keep_alive_timeout_s = http_defaults.keep_alive_timeout_s;
  int body_timeout_s = http_defaults.body_timeout_s;
  int write_timeout_s = http_defaults.write_timeout_s;
  int max_connections = http_defaults.max_connections;
  std::string log_level = "info";
  double drain_timeout_s = 30.0;
  int64_t responses_store_size = 1024;  // /v1/responses kept for previous_response_id
  int64_t responses_store_ttl_s = 3600;
  bool skip_warmup = false;
  bool no_webui = false;  // --no-webui: GET / and /ui/* unrouted
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The tokenizer and the chat template; chat is off (with a warning) when the folder has no
// template or it does not parse.
struct TextSide {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;  // null: chat off
};

Result<TextSide> load_text_side(const std::string& model_dir) {
  TextSide out;
  SYV_ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::load(model_dir));
  std::string template_source = out.tokenizer->chat_template();
  const std::string jinja_path = model_dir + "/chat_template.jinja";
  if (template_source.empty() && std::filesystem::exists(jinja_path)) {
    template_source = read_file(jinja_path);
  }
  if (template_source.empty()) {
    SYV_LOG(WARN)
        << "chat: off (no chat_template in tokenizer_config.json or chat_template.jinja); "
           "/v1/chat/completions answers 400";
  } else {
    Result<ChatTemplate> parsed = ChatTemplate::parse(template_source);
    if (!parsed.ok()) {
      SYV_LOG(WARN) << "chat: off, the chat template does not parse: " << parsed.message();
    } else {
      out.chat_template = std::make_unique<ChatTemplate>(std::move(parsed.value()));
    }
  }
  return out;
}

// SIGTERM / SIGINT: the handler only writes the signal number to a pipe (async-signal-safe); the
// main thread reads it. Whichever thread the kernel picks to run the handler, the signal never
// takes its default action (termination). A mask set in main() could not promise that: OpenBLAS
// starts its worker threads in a constructor before main(), with the signals unblocked.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

Status install_stop_signals() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::Error(std::string("signal pipe: ") + std::strerror(errno));
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT}) {
    if (sigaction(sig, &sa, nullptr) != 0) {
      return Status::Error(std::string("sigaction: ") + std::strerror(errno));
    }
  }
  // Unblock them here too, in case the parent left them blocked.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  return Status::Ok();
}

// Waits up to `timeout` (forever when negative) for SIGTERM or SIGINT; returns it, or 0.
int wait_for_signal(int timeout_ms = -1) {
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int wait_ms = timeout_ms;
    if (timeout_ms >= 0) {
      wait_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                   std::chrono::steady_clock::now())
                 .count()));
    }
    const int r = poll(&p, 1, wait_ms);
    if (r > 0) {
      unsigned char byte = 0;
      if (read(g_signal_pipe[0], &byte, 1) == 1) return byte;
    }
    if (r == 0) return 0;
    if (r < 0 && errno != EINTR) return 0;
  }
}

int run_serve(const ServeOptions& o) {
  set_log_level(o.log_level == "debug"   ? LogLevel::DEBUG
                : o.log_level == "warn"  ? LogLevel::WARN
                : o.log_level == "error" ? LogLevel::ERROR
                                         : LogLevel::INFO);
  // Keys: explicit ones, or a generated one printed once.
  server::ApiKeys keys;
  for (const std::string& key : o.api_keys) {
    Status st = keys.add(key);
    if (!st.ok()) return fail("--api-key: " + st.message());
  }
  if (!o.api_key_file.empty()) {
    Status st = keys.add_file(o.api_key_file);
    if (!st.ok()) return fail("--api-key-file: " + st.message());
  }
  // The environment, for keys that should not show in `ps`: SYV_API_KEY (one key) and
  // SYV_API_KEY_FILE (a key file), combined with the flags.
  if (const char* env = std::getenv("SYV_API_KEY"); env != nullptr && *env != '\0') {
    const bool given = std::find(o.api_keys.begin(), o.api_keys.end(), env) != o.api_keys.end();
    if (!given) {
      Status st = keys.add(env);
      if (!st.ok()) return fail("SYV_API_KEY: " + st.message());
    }
  }
  if (const char* env = std::getenv("SYV_API_KEY_FILE"); env != nullptr && *env != '\0') {
    Status st = keys.add_file(env);
    if (!st.ok()) return fail("SYV_API_KEY_FILE: " + st.message());
  }
  if (!o.public_routes.empty()) {
    Status st = keys.add_public_routes(o.public_routes);
    if (!st.ok()) return fail(st.message());
  }
  const bool explicit_key = !keys.empty();
  if (!explicit_key && !server::is_loopback_host(o.host)) {
    return fail("--host " + o.host + " is not a loopback address and no API key was given",
                "pass --api-key KEY or --api-key-file FILE to serve beyond this machine");
  }
  std::string generated_key;
  if (!explicit_key) {
    Result<std::string> key = server::generate_api_key();
    if (!key.ok()) return fail(key.message());
    generated_key = *key;
    (void)keys.add(generated_key);
  }
  const int max_num_seqs = o.engine.options.max_num_seqs;
  if (max_num_seqs < 1) return fail("--max-num-seqs: expected >= 1");
  if (o.max_waiting < 0) return fail("--max-waiting: expected >= 0");
  if (Status st = check_model_folder(o.model_dir); !st.ok())
    return fail("--model: " + st.message());

  // Start-up checks, before the port is bound (so a bad folder, flag or model that cannot fit
  // exits at once, never holding the port): the backend, the folder, config.json,
  // the weight headers and the memory they need (model/prepare_model.h), the tokenizer and the
  // chat template.
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Backend>> backend = make_cli_backend(o.device);
  if (!backend.ok()) return fail(backend.message());
  const double backend_s = since(t0);
  SYV_LOG(INFO) << "backend: " << (*backend)->name() << ", up in " << backend_s << " s";
  apply_batch_invariant(**backend, o.batch_invariant);
  if (Status st = apply_quantized_activations(**backend, o.quantized_activations); !st.ok())
    return fail(st.message());
  // The other ranks' backends (devices 1..N-1 and the NCCL group on CUDA), before the port is
  // bound.
  Result<TpRanks> ranks = make_tp_ranks(**backend, o.tensor_parallel_size);
  if (!ranks.ok()) return fail(ranks.message());
  if (Status st = apply_quantized_activations(ranks->owned, o.quantized_activations); !st.ok())
    return fail(st.message());
  const auto t_tokenizer = std::chrono::steady_clock::now();
  Result<TextSide> text = load_text_side(o.model_dir);
  if (!text.ok()) return fail("--model: " + text.message());
  std::unique_ptr<Tokenizer>& tokenizer = text->tokenizer;
  std::unique_ptr<ChatTemplate>& chat_template = text->chat_template;
  const double tokenizer_s = since(t_tokenizer);
  SYV_LOG(INFO) << "tokenizer: vocab " << tokenizer->vocab_size() << ", loaded in " << tokenizer_s
                << " s";
  LoadOptions load_options;
  load_options.mtp = o.engine.wants_mtp();  // --speculative-method mtp: the checkpoint's MTP head
  load_options.host_embeddings = o.host_embeddings;
  Result<PreparedModel> prepared = prepare_model(o.model_dir, **backend, load_options);
  if (!prepared.ok()) return fail("--model: " + prepared.message());
  if (Status st = check_tp_model(prepared->config, o.tensor_parallel_size); !st.ok())
    return fail(st.message());
  Result<std::optional<DType>> kv_dtype =
      resolve_kv_cache_dtype(o.engine.kv_cache_dtype, **backend, prepared->config);
  if (!kv_dtype.ok()) return fail(kv_dtype.message());

  // Signals: SIGTERM/SIGINT go through a pipe to the wait below; a dead client never kills us.
  if (Status st = install_stop_signals(); !st.ok()) return fail(st.message());
  signal(SIGPIPE, SIG_IGN);

  server::Metrics metrics;
  server::RouteOptions route_options;
  route_options.max_pending = max_num_seqs + o.max_waiting;
  route_options.limits.max_json_values = o.max_json_values;
  route_options.max_parse_bytes = o.max_parse_memory_mb << 20;
  route_options.responses_store.max_entries = static_cast<size_t>(o.responses_store_size);
  route_options.responses_store.ttl = std::chrono::seconds(o.responses_store_ttl_s);
  server::OpenAiRoutes routes(metrics, route_options);
  server::HttpOptions http;
  http.host = o.host;
  http.port = o.port;
  http.threads =
      o.http_threads > 0 ? o.http_threads : std::min(1024, max_num_seqs + o.max_waiting + 16);
  http.limits.max_body_bytes = o.max_body_bytes;
  http.limits.max_header_bytes = o.max_header_bytes;
  http.limits.max_header_count = o.max_header_count;
  http.limits.max_uri_bytes = o.max_uri_bytes;
  http.limits.accept_compressed = o.accept_compressed;
  http.header_timeout_s = o.header_timeout_s;
  http.keep_alive_timeout_s = o.keep_alive_timeout_s;
  http.body_timeout_s = o.body_timeout_s;
  http.write_timeout_s = o.write_timeout_s;
  http.max_connections = o.max_connections;
  Result<server::CorsPolicy> cors = server::CorsPolicy::parse(o.allowed_origins);
  if (!cors.ok()) return fail(cors.message());
  http.cors = std::move(cors.value());
  http.webui = !o.no_webui;
  const size_t num_keys = keys.size();
  std::string masked_keys;                           // keys are never printed whole
  for (size_t i = 0; i < keys.keys().size(); ++i) {  // numbered as the access log names them
    masked_keys.append(i == 0 ? "#" : ", #").append(std::to_string(i + 1)).append(" ");
    masked_keys.append(server::mask_key(keys.keys()[i]));
  }
  // Bound (and listening, so the port is exclusively ours and a port in use fails now, before a
  // long load) but not accepting: a client that connects while the model loads waits in the
  // backlog and is answered once the server starts below.
  server::HttpServer server(http, std::move(keys), routes, metrics);
  if (Status st = server.bind(); !st.ok()) return fail(st.message());
  SYV_LOG(INFO) << "http: bound port " << server.port()
                << "; connections are accepted once the model is ready";
  const server::HttpOptions& used = server.options();  // after bind(): the connection cap fits
  SYV_LOG(INFO) << "http: " << used.threads << " worker threads, " << used.max_connections
                << " connections at most, body limit " << used.limits.max_body_bytes
                << " bytes (compressed bodies "
                << (used.limits.accept_compressed ? "inflated within it" : "refused") << "), head "
                << used.limits.max_header_bytes << " bytes / " << used.limits.max_header_count
                << " fields in " << used.header_timeout_s << " s, body in " << used.body_timeout_s
                << " s, " << route_options.max_pending
                << " requests in flight at most (--max-num-seqs + --max-waiting), "
                << route_options.limits.max_json_values << " JSON values a body at most, "
                << o.max_parse_memory_mb << " MiB of request parses at once";
  SYV_LOG(INFO) << "http: CORS "
                << (http.cors.enabled() ? "for origins " + o.allowed_origins
                                        : std::string("off (no --allowed-origins)"));

  // Load the weights (checked above).
  const auto t1 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Model>> model = load_tp_model(*prepared, *ranks, load_options);
  if (!model.ok()) return fail("--model: " + model.message());
  std::unique_ptr<Model> draft;
  if (std::string e = o.engine.draft_model_error(); !e.empty()) return fail(e);
  if (o.engine.wants_draft_model()) {  // before the plan: its weights count as loaded
    auto d = load_draft_model(o.engine.draft_model_dir, **backend);
    if (!d.ok()) return fail(d.message());
    draft = std::move(d.value());
  }
  const double model_s = since(t1);
  SYV_LOG(INFO) << "model: loaded in " << model_s << " s";

  // Plan: KV pool and limits (logged by the engine), then the decode graphs (captured here with
  // --cuda-graphs eager; the engine logs the buckets and the capture time).
  const auto t_engine = std::chrono::steady_clock::now();
  EngineOptions engine_options = o.engine.resolved();
  engine_options.kv_dtype = *kv_dtype;
  engine_options.draft_model = draft.get();
  choose_step_budget(**backend, (**model).config(), o.tensor_parallel_size, o.budget_given,
                     &engine_options);
  Result<std::optional<server::MemoryPlanFacts>> planned_pool =
      size_kv_pool(**backend, **model, &engine_options, o.kv_cache_mb_given,
                   {o.gpu_memory_utilization, o.gpu_memory_gib, o.gpu_memory_given});
  if (!planned_pool.ok()) return fail(planned_pool.message());
  std::optional<server::MemoryPlanFacts> plan_facts = *planned_pool;  // when the plan sized it
  const bool planned = plan_facts.has_value();
  const std::string kv_sized_by = planned                        ? "gpu-memory-utilization"
                                  : engine_options.num_pages > 0 ? "num-pages"
                                                                 : "kv-cache-mb";
  Engine engine(**model, tokenizer.get(), engine_options);
  if (Status st = engine.start(); !st.ok()) return fail("engine: " + st.message());
  const double engine_s = since(t_engine);
  SYV_LOG(INFO) << "engine: plan + KV pool + CUDA graphs (" << engine.options().cuda_graphs
                << ") in " << since(t_engine) << " s";
  metrics.set_deployment(
      serve_deployment_facts(**backend, engine, kv_sized_by, std::move(plan_facts)));
  server::EngineGenerator generator(engine);

  // Warm-up: one short greedy request through the whole path.
  double warmup_s = 0;
  if (!o.skip_warmup) {
    const auto t2 = std::chrono::steady_clock::now();
    Request warm;
    warm.prompt_ids = tokenizer->encode("Hello", false);
    if (warm.prompt_ids.empty()) warm.prompt_ids = {0};
    warm.params.temperature = 0;
    warm.params.max_tokens = 2;
    Result<std::shared_ptr<RequestHandle>> handle = engine.submit(std::move(warm));
    if (!handle.ok()) return fail("warm-up: " + handle.message());
    Event event;
    while ((*handle)->next(event, std::chrono::seconds(600)) == NextStatus::kEvent) {
    }
    warmup_s = since(t2);
    SYV_LOG(INFO) << "warm-up: done in " << warmup_s << " s";
  }

  server::ModelContext context;
  context.tokenizer = tokenizer.get();
  context.chat_template = chat_template.get();
  context.generator = &generator;
  context.model_name =
      o.served_model_name.empty()
          ? std::filesystem::path(o.model_dir).lexically_normal().filename().string()
          : o.served_model_name;
  if (context.model_name.empty()) context.model_name = "model";
  for (const char* stop : {"<|im_end|>", "<|endoftext|>"}) {
    if (auto id = tokenizer->token_to_id(stop)) context.chat_stop_token_ids.push_back(*id);
  }
  routes.set_model(context);
  server.set_ready(true);
  server.start();
  const std::string url = "http://" +
                          (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) +
                          ":" + std::to_string(server.port());
  std::printf("syv: listening on %s\n", url.c_str());
  if (!generated_key.empty()) {
    std::printf("syv: API key (generated for this run; pass --api-key to choose one): %s\n",
                generated_key.c_str());
  } else {
    std::printf("syv: %zu API key(s) configured: %s\n", num_keys, masked_keys.c_str());
  }
  if (http.webui) {
    std::printf("syv: chat page: %s/ (paste the API key into it; --no-webui turns it off)\n",
                url.c_str());
  }
  char phases[200];
  std::snprintf(phases, sizeof phases,
                "start-up: backend %.2f s, tokenizer %.2f s, model %.2f s, engine %.2f s, "
                "warm-up %.2f s; ready %.2f s after start",
                backend_s, tokenizer_s, model_s, engine_s, warmup_s, since(t0));
  SYV_LOG(INFO) << phases;
  std::printf("syv: ready: model \"%s\", max context %d tokens, %.1f s after start\n",
              context.model_name.c_str(), generator.max_model_len(), since(t0));
  std::printf(
      "syv: try: curl %s/v1/chat/completions -H \"Authorization: Bearer $KEY\" "
      "-H 'Content-Type: application/json' -d '{\"messages\":[{\"role\":\"user\","
      "\"content\":\"Hello\"}],\"max_tokens\":16}'\n",
      url.c_str());
  std::fflush(stdout);

  const int sig = wait_for_signal();
  SYV_LOG(INFO) << "signal " << sig << ": draining " << routes.active_requests()
                << " request(s) (up to " << o.drain_timeout_s << " s)";
  server.begin_drain();
  // Drain until idle, the timeout, or a second signal (which aborts what is left at once: every
  // open stream still ends, with finish_reason "abort" and [DONE]).
  const auto drain_deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(o.drain_timeout_s * 1000));
  bool idle = false;
  int second = 0;
  while (!(idle = server.wait_idle(std::chrono::milliseconds(0))) &&
         std::chrono::steady_clock::now() < drain_deadline) {
    if ((second = wait_for_signal(50)) != 0) break;
  }
  if (second != 0) {
    SYV_LOG(WARN) << "signal " << second << " during the drain: aborting "
                  << routes.active_requests() << " request(s) now";
  } else if (!idle) {
    SYV_LOG(WARN) << "drain: timed out; aborting what is left";
  }
  engine.stop(/*drain=*/idle);
  // Let the aborted streams write their last events before the listener goes.
  if (!idle) server.wait_idle(std::chrono::seconds(5));
  server.stop();
  SYV_LOG(INFO) << "stopped";
  return second != 0 ? 1 : 0;
}

CommandRegistration reg{
    "serve", "Serve a model over an OpenAI-compatible HTTP API (deny-by-default API keys)",
    [](CLI::App& app) {
      auto o = std::make_shared<ServeOptions>();
      app.add_option("--model", o->model_dir, "Hugging Face model folder")->required();
      add_host_embeddings_arg(app, o->host_embeddings);
      add_quantized_activations_arg(app, o->quantized_activations);
      app.add_option("--host", o->host, "Address to bind; non-loopback needs an explicit key")
          ->capture_default_str();
      app.add_option("--port", o->port, "Port to bind, 1..65535 (0 = any free port)")
          ->check(CLI::Range(0, 65535))
          ->capture_default_str();
      app.add_option("--api-key", o->api_keys,
                     "Accepted API key (repeatable); none = a random key printed at start");
      app.add_option("--api-key-file", o->api_key_file, "File with one API key a line");
      app.add_option("--public-routes", o->public_routes,
                     "Comma-separated routes reachable without a key, e.g. /health,/metrics");
      app.add_option("--allowed-origins", o->allowed_origins,
                     "CORS: comma-separated browser origins allowed to call the API "
                     "(https://app.example.com,http://localhost:3000) or *; preflights are "
                     "answered before auth. Default: none (no CORS headers)");
      app.add_option("--served-model-name", o->served_model_name,
                     "Model id in the API (default: the model folder's name)");
      add_device_arg(app, o->device);
      add_tensor_parallel_arg(app, o->tensor_parallel_size);
      app.add_flag(
          "--batch-invariant", o->batch_invariant,
          "Bit-identical logits for a request whatever else is batched with it and however "
          "its prompt is chunked (slower kernels; docs/configuration.md)");
      add_engine_args(app, o->engine);
      CLI::Option* kv_cache_mb = app.get_option("--kv-cache-mb");
      CLI::Option* utilization =
          app.add_option(
                 "--gpu-memory-utilization", o->gpu_memory_utilization,
                 "On a GPU, the share of device memory for weights, activations and the KV "
                 "pool: the pool gets what is left (default 0.90; --kv-cache-mb or "
                 "--num-pages override it). The CPU backend keeps --kv-cache-mb's 1024 MiB.")
              ->check(CLI::Range(0.05, 1.0))
              ->capture_default_str();
      CLI::Option* memory_gib =
          app.add_option("--gpu-memory-gib", o->gpu_memory_gib,
                         "On a GPU, plan as if the device had this many GiB (at most its own): "
                         "the rest is left to other processes. Default: the device's total.")
              ->check(CLI::PositiveNumber);
      app.add_option("--max-waiting", o->max_waiting,
                     "Requests queued beyond --max-num-seqs before 429")
          ->capture_default_str();
      app.add_option("--http-threads", o->http_threads,
                     "HTTP worker threads; each open stream holds one (0 = max-num-seqs + "
                     "max-waiting + 16)")
          ->capture_default_str();
      app.add_option("--max-body-bytes", o->max_body_bytes,
                     "Larger request bodies (declared, chunked or inflated) get 413, refused while "
                     "they are read")
          ->check(CLI::Range(size_t{1024}, size_t{1} << 32))
          ->capture_default_str();
      app.add_option("--max-json-values", o->max_json_values,
                     "A request body with more JSON values (numbers, strings, objects, ...) gets "
                     "400 before it is parsed; bounds the memory of its parse (~0.5 KB a value)")
          ->check(CLI::Range(size_t{1024}, size_t{1} << 26))
          ->capture_default_str();
      app.add_option("--max-parse-memory-mb", o->max_parse_memory_mb,
                     "Estimated memory of the request bodies parsed at once, server-wide (body "
                     "bytes + 512 bytes a JSON value): a body that does not fit next to the others "
                     "gets 503 server_busy + Retry-After, one larger than all of it 413")
          ->check(CLI::Range(size_t{1}, size_t{1} << 20))
          ->capture_default_str();
      app.add_option("--max-header-bytes", o->max_header_bytes,
                     "The request line, and the header fields together, larger than this get 431")
          ->check(CLI::Range(size_t{1024}, size_t{1} << 20))
          ->capture_default_str();
      app.add_option("--max-header-count", o->max_header_count,
                     "More request header fields than this get 431")
          ->check(CLI::Range(size_t{8}, size_t{10000}))
          ->capture_default_str();
      app.add_option("--max-uri-bytes", o->max_uri_bytes, "A longer request target gets 414")
          ->check(CLI::Range(size_t{256}, size_t{1} << 20))
          ->capture_default_str();
      app.add_flag("--accept-compressed", o->accept_compressed,
                   "Accept gzip / deflate request bodies (Content-Encoding), inflated after auth "
                   "within --max-body-bytes; without it they get 415");
      app.add_option("--header-timeout", o->header_timeout_s,
                     "Seconds a new connection has to send its whole request line and headers")
          ->check(CLI::Range(1, 3600))
          ->capture_default_str();
      app.add_option("--keep-alive-timeout", o->keep_alive_timeout_s,
                     "Seconds an idle keep-alive connection has to send its next request head")
          ->check(CLI::Range(1, 3600))
          ->capture_default_str();
      app.add_option("--body-timeout", o->body_timeout_s,
                     "Seconds a request has to send its whole body")
          ->check(CLI::Range(1, 3600))
          ->capture_default_str();
      app.add_option("--write-timeout", o->write_timeout_s,
                     "Seconds each write of a response (each stream event) may wait for the client")
          ->check(CLI::Range(1, 3600))
          ->capture_default_str();
      app.add_option("--max-connections", o->max_connections,
                     "Open connections at most (more are closed at accept; lowered to fit the "
                     "open-file limit)")
          ->check(CLI::Range(16, 1 << 20))
          ->capture_default_str();
      app.add_option("--log-level", o->log_level,
                     "debug, info (one access-log line per request), warn (failed auth, "
                     "problems) or error")
          ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
          ->capture_default_str();
      app.add_option("--drain-timeout", o->drain_timeout_s,
                     "Seconds SIGTERM waits for running requests")
          ->capture_default_str();
      app.add_option("--responses-store-size", o->responses_store_size,
                     "/v1/responses kept in memory for previous_response_id (0 = none); the "
                     "oldest goes first")
          ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
          ->capture_default_str();
      app.add_option("--responses-store-ttl", o->responses_store_ttl_s,
                     "Seconds a stored /v1/responses response stays usable")
          ->check(CLI::Range(int64_t{1}, int64_t{30} * 24 * 3600))
          ->capture_default_str();
      app.add_flag("--skip-warmup", o->skip_warmup, "Mark ready without a warm-up request");
      app.add_flag("--no-webui", o->no_webui,
                   "Do not serve the chat page at / (GET / and /ui/* are then unrouted)");
      app.add_option("--preset", o->preset,
                     std::string("Named flags for one kind of use (") + kPresetNames +
                         "), printed at start-up; flags given on the command line win "
                         "(docs/configuration.md \"Presets\")");
      return [o, kv_cache_mb, utilization, memory_gib, &app]() -> int {
        if (!o->preset.empty()) {
          Result<Preset> preset = resolve_preset(o->preset, o->model_dir);
          if (!preset.ok()) return fail(preset.message());
          Result<std::string> line = apply_preset(app, *preset);
          if (!line.ok()) return fail(line.message());
          std::printf("syv: %s\n", line->c_str());
          std::fflush(stdout);
        }
        o->kv_cache_mb_given = kv_cache_mb->count() > 0;
        o->gpu_memory_given = utilization->count() > 0 || memory_gib->count() > 0;
        o->budget_given = app.get_option("--max-batched-tokens")->count() > 0;
        return run_serve(*o);
      };
    }};

}  // namespace
}  // namespace syv::cli
