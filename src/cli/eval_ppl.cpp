// `syv eval-ppl`: perplexity of a text file under a model, computed by syv itself (any folder
// `syv serve` loads, quantized ones included), so a quantization or a backend can be scored
// without Python. Windowing is tools/train/eval.py's window_nll(), exactly:
//
//   tokens = tokenizer(file) (no special tokens added), n of them
//   windows start at 0, C, 2C, ... (while start < n - 1), each holding tokens [start, start + C)
//   (the last one fewer); each window runs as a fresh sequence, and every token of it but the first
//   is scored given the tokens before it in that window:
//   ppl = exp(sum of -log p(token) / number scored)
//
// so for the same folder and context it reproduces transformers' figure (tests/e2e/
// tiny_models_eval_ppl_test.cpp against tests/fixtures/tiny/*/meta.json "sample").
//
// --kl-reference KV_DTYPE runs every window a second time, side by side, with the KV cache in
// KV_DTYPE (the reference, e.g. auto = the float cache) and adds the mean over scored positions of
// KL(reference || this run) of the full next-token distributions, and the reference's ppl: what a
// quantized KV cache (--kv-cache-dtype fp8 / int4) costs, beyond the ppl.
//
// --kl-reference-model DIR does the same with another folder as the reference (on its own backend
// of the same --device, with the same --kv-cache-dtype, so only the weights differ): what a
// weight format costs, e.g. a `syv quantize`d copy scored against the bf16 folder it came from.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/command.h"
#include "cli/kv_cache_dtype.h"
#include "cli/model_session.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

constexpr int64_t kDefaultContext = 1024;
// Logit rows per forward: a window runs in chunks of at most this many floats of logits on the
// host (64 MiB), so a 152k vocabulary at a long context never needs gigabytes at once.
constexpr int64_t kMaxLogitFloats = int64_t{16} << 20;

struct Options {
  ModelArgs model;
  std::string text_file;
  int64_t context = 0;  // 0: kDefaultContext, or max_position_embeddings when smaller
  bool json = false;
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype (cli/kv_cache_dtype.h)
  std::string kl_reference;             // --kl-reference KV_DTYPE ("": none)
  std::string kl_reference_model;       // --kl-reference-model DIR ("": none)
};

// log sum exp(row), in double.
double log_sum_exp(const float* row, int64_t vocab) {
  const float mx = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
  return std::log(sum) + mx;
}

// -log softmax(row)[target], in double.
double neg_log_prob(const float* row, int64_t vocab, int32_t target) {
  return log_sum_exp(row, vocab) - row[target];
}

// KL(softmax(ref) || softmax(run)) = sum_v p_ref(v) (log p_ref(v) - log p_run(v)), in double.
double kl_divergence(const float* ref, const float* run, int64_t vocab) {
  const double lse_ref = log_sum_exp(ref, vocab), lse_run = log_sum_exp(run, vocab);
  double kl = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double log_p = ref[v] - lse_ref;
    kl += std::exp(log_p) * (log_p - (run[v] - lse_run));
  }
  return std::max(kl, 0.0);  // >= 0 up to rounding
}

struct Score {
  double nll_sum = 0;
  int64_t scored = 0;
  int64_t windows = 0;
  double ref_nll_sum = 0;  // --kl-reference: the reference run's nll, and the KL summed
  double kl_sum = 0;
};

// The windows of the header over `ids`, through `seq` (restarted for each), and through `ref`
// alongside when given (--kl-reference).
Score score_windows(SingleSequence& seq, SingleSequence* ref, const std::vector<int32_t>& ids,
                    int64_t context, int64_t vocab) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t chunk = std::max<int64_t>(1, std::min(context, kMaxLogitFloats / vocab));
  Score s;
  for (int64_t start = 0; start < n - 1; start += context) {
    const int64_t end = std::min(n, start + context);
    seq.restart();
    if (ref) ref->restart();
    for (int64_t c = start; c < end; c += chunk) {
      const int64_t c_end = std::min(end, c + chunk);
      const std::vector<int32_t> part(ids.begin() + c, ids.begin() + c_end);
      const std::vector<float> logits = seq.append(part, /*all_rows=*/true);
      const std::vector<float> ref_logits =
          ref ? ref->append(part, /*all_rows=*/true) : std::vector<float>();
      // Row r predicts token c + r + 1, scored while it is inside the window.
      for (int64_t r = 0; c + r < c_end && c + r + 1 < end; ++r) {
        s.nll_sum += neg_log_prob(&logits[r * vocab], vocab, ids[c + r + 1]);
        if (ref) {
          s.ref_nll_sum += neg_log_prob(&ref_logits[r * vocab], vocab, ids[c + r + 1]);
          s.kl_sum += kl_divergence(&ref_logits[r * vocab], &logits[r * vocab], vocab);
        }
        ++s.scored;
      }
    }
    ++s.windows;
  }
  return s;
}

int run(const Options& o) {
  const char* hint = "--model takes a Hugging Face model folder (config.json + *.safetensors)";
  auto config = read_cli_config(o.model);
  if (!config.ok()) return fail(config.message(), hint);
  const int64_t max_pos = config->max_position_embeddings;
  int64_t context = o.context;
  if (context == 0) context = max_pos > 0 ? std::min(kDefaultContext, max_pos) : kDefaultContext;
  if (context < 2) return fail("--context: expected >= 2, found " + std::to_string(context));
  if (max_pos > 0 && context > max_pos) {
    return fail("--context: " + std::to_string(context) + " exceeds the model's " +
                "max_position_embeddings " + std::to_string(max_pos));
  }

  std::ifstream in(o.text_file, std::ios::binary);
  if (!in) return fail("--text-file \"" + o.text_file + "\": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  auto tokenizer = Tokenizer::load(o.model.model_dir);
  if (!tokenizer.ok()) {
    return fail("eval-ppl needs the model's tokenizer: " + tokenizer.message(),
                "the folder must hold tokenizer.json (+ tokenizer_config.json)");
  }
  const std::vector<int32_t> ids = (*tokenizer)->encode(text.str(), /*add_special_tokens=*/false);
  if (ids.size() < 2) {
    return fail("--text-file \"" + o.text_file + "\": encodes to " + std::to_string(ids.size()) +
                " token(s); at least 2 are needed to score one");
  }
  for (int32_t id : ids) {
    if (id >= config->vocab_size) {
      return fail("--text-file: token " + std::to_string(id) +
                  " is outside the model's vocabulary [0, " + std::to_string(config->vocab_size) +
                  ") (tokenizer and model disagree)");
    }
  }

  auto loaded = load_cli_model(o.model);
  if (!loaded.ok()) return fail(loaded.message(), model_load_hint(loaded.message()));
  Model& model = *loaded->model;
  auto kv_dtype = resolve_kv_cache_dtype(o.kv_cache_dtype, model.backend(), *config);
  if (!kv_dtype.ok()) return fail(kv_dtype.message());
  auto seq = SingleSequence::create(model, context, *kv_dtype);
  if (!seq.ok()) return fail(seq.message());
  std::optional<LoadedModel> ref_loaded;  // --kl-reference-model (declared first: outlives `ref`)
  std::optional<SingleSequence> ref;
  if (!o.kl_reference_model.empty()) {
    ModelArgs ref_args = o.model;
    ref_args.model_dir = o.kl_reference_model;
    auto ref_config = read_cli_config(ref_args);
    if (!ref_config.ok()) return fail("--kl-reference-model: " + ref_config.message());
    if (ref_config->vocab_size != config->vocab_size) {
      return fail("--kl-reference-model: vocab_size " + std::to_string(ref_config->vocab_size) +
                  " against --model's " + std::to_string(config->vocab_size) +
                  "; the two folders must share a tokenizer");
    }
    auto r_model = load_cli_model(ref_args);
    if (!r_model.ok()) return fail("--kl-reference-model: " + r_model.message());
    ref_loaded.emplace(std::move(r_model.value()));
    Model& ref_model = *ref_loaded->model;
    auto ref_dtype = resolve_kv_cache_dtype(o.kv_cache_dtype, ref_model.backend(), *ref_config);
    if (!ref_dtype.ok()) return fail("--kl-reference-model: " + ref_dtype.message());
    auto r = SingleSequence::create(ref_model, context, *ref_dtype);
    if (!r.ok()) return fail("--kl-reference-model: " + r.message());
    ref.emplace(std::move(r.value()));
  }
  if (!o.kl_reference.empty()) {
    auto ref_dtype = resolve_kv_cache_dtype(o.kl_reference, model.backend(), *config);
    if (!ref_dtype.ok()) return fail("--kl-reference: " + ref_dtype.message());
    auto r = SingleSequence::create(model, context, *ref_dtype);
    if (!r.ok()) return fail("--kl-reference: " + r.message());
    ref.emplace(std::move(r.value()));
  }

  const auto t0 = std::chrono::steady_clock::now();
  const Score s = score_windows(*seq, ref ? &*ref : nullptr, ids, context, config->vocab_size);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double ppl = std::exp(s.nll_sum / static_cast<double>(s.scored));
  const double ref_ppl = std::exp(s.ref_nll_sum / static_cast<double>(s.scored));
  const double delta_percent = 100.0 * (ppl / ref_ppl - 1.0);
  const double mean_kl = s.kl_sum / static_cast<double>(s.scored);
  const std::string device = model.backend().name();
  if (o.json) {
    nlohmann::json j;
    j["ppl"] = ppl;
    j["nll_sum"] = s.nll_sum;
    j["tokens_scored"] = s.scored;
    j["tokens"] = ids.size();
    j["windows"] = s.windows;
    j["context"] = context;
    j["seconds"] = seconds;
    j["device"] = device;
    j["kv_cache_dtype"] = o.kv_cache_dtype;
    if (ref) {
      if (!o.kl_reference.empty()) j["kl_reference"] = o.kl_reference;
      if (!o.kl_reference_model.empty()) j["kl_reference_model"] = o.kl_reference_model;
      j["reference_ppl"] = ref_ppl;
      j["delta_ppl_percent"] = delta_percent;
      j["mean_kl"] = mean_kl;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "perplexity %.4f over %lld scored tokens (%zu tokens, %lld windows of up to %lld); "
        "%.2f s on %s (%.0f tokens/s)\n",
        ppl, static_cast<long long>(s.scored), ids.size(), static_cast<long long>(s.windows),
        static_cast<long long>(context), seconds, device.c_str(),
        static_cast<double>(ids.size()) / seconds);
    if (ref) {
      const std::string against = o.kl_reference.empty()
                                      ? "--kl-reference-model " + o.kl_reference_model
                                      : "--kl-reference " + o.kl_reference;
      std::printf(
          "against %s (KV cache %s here): reference perplexity %.4f, delta %+.3f%%, mean "
          "KL(reference || this) %.6g nats per scored token\n",
          against.c_str(), o.kv_cache_dtype.c_str(), ref_ppl, delta_percent, mean_kl);
    }
  }
  return 0;
}

CommandRegistration reg{
    "eval-ppl", "Perplexity of a text file under a model, computed by syv", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.footer(
          "Tokenizes the file with the model's tokenizer (no special tokens added), cuts the ids\n"
          "into non-overlapping windows of --context tokens (the last one shorter), runs each\n"
          "window as a fresh sequence and scores every token of it but the first given the ones\n"
          "before it: ppl = exp(mean of -log p). This is tools/train/eval.py's definition, so\n"
          "the same folder, file and --context give transformers' figure (docs/models.md).\n"
          "Quantized folders load as `syv serve` loads them, so the ppl a quantization costs\n"
          "is the difference from the bf16 folder's.\n"
          "A longer context scores most tokens with more history: compare figures at one "
          "context.\n\n"
          "Examples:\n"
          "  syv eval-ppl --model models/tiny-dense --text-file "
          "tests/fixtures/tiny/heldout_sample.txt --context 256\n"
          "  syv eval-ppl --model models/tiny-dense --text-file F --context 256 "
          "--kv-cache-dtype fp8 --kl-reference auto\n"
          "  syv eval-ppl --model DIR-gptq --text-file F --context 256 --kl-reference-model "
          "models/tiny-dense\n"
          "  syv eval-ppl --model DIR-fp8 --text-file F --device cuda --json   "
          "# {\"ppl\":...,\"tokens_scored\":...,\"seconds\":...}\n");
      add_model_args(app, o->model);
      add_device_arg(app, o->model.device);
      add_kv_cache_dtype_arg(app, o->kv_cache_dtype);
      app.add_option("--text-file", o->text_file, "The text to score (its bytes, as UTF-8).")
          ->required();
      app.add_option("--context", o->context,
                     "Tokens per window (default: 1024, or the model's max_position_embeddings "
                     "when smaller).");
      app.add_flag("--json", o->json,
                   "Print one JSON object: ppl, nll_sum, tokens_scored, tokens, windows, "
                   "context, seconds (the forwards and scoring, not the load), device, "
                   "kv_cache_dtype (and with --kl-reference or --kl-reference-model: that "
                   "flag's value, reference_ppl, delta_ppl_percent, mean_kl).");
      app.add_option("--kl-reference", o->kl_reference,
                     "Also run the text with the KV cache in this dtype (auto, bf16, f32, fp8, "
                     "int4; e.g. auto = the float cache) and print its ppl, this run's ppl "
                     "change against it, and the mean KL(reference || this run) of the full "
                     "next-token distributions over the scored positions (twice the time).")
          ->check(CLI::IsMember({"auto", "bf16", "f32", "fp8", "int4"}));
      app.add_option("--kl-reference-model", o->kl_reference_model,
                     "As --kl-reference, with another model folder as the reference (same "
                     "tokenizer; same --device and --kv-cache-dtype, so only the weights "
                     "differ): e.g. a `syv quantize`d copy as --model, its bf16 source here.")
          ->excludes("--kl-reference");
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
