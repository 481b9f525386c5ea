// `syv logits`: fp32 logits of every position of a token sequence, for comparing syv with a
// reference (transformers) byte for byte; --device cpu (the default) or cuda, as `syv serve`.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/command.h"
#include "cli/kv_cache_dtype.h"
#include "cli/model_session.h"

namespace syv::cli {
namespace {

struct Options {
  ModelArgs model;
  std::string tokens;
  std::string out;
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype (cli/kv_cache_dtype.h)
};

int run(const Options& o) {
  const char* hint = "--model takes a Hugging Face model folder (config.json + *.safetensors)";
  auto config = read_cli_config(o.model);
  if (!config.ok()) return fail(config.message(), hint);
  const int64_t vocab = config->vocab_size;
  auto ids = parse_token_list(o.tokens, vocab);
  if (!ids.ok()) return fail(ids.message());
  auto loaded = load_cli_model(o.model);
  if (!loaded.ok()) return fail(loaded.message(), model_load_hint(loaded.message()));
  Model& model = *loaded->model;
  auto kv_dtype = resolve_kv_cache_dtype(o.kv_cache_dtype, model.backend(), *config);
  if (!kv_dtype.ok()) return fail(kv_dtype.message());
  auto seq = SingleSequence::create(model, static_cast<int64_t>(ids->size()), *kv_dtype);
  if (!seq.ok()) return fail(seq.message());

  const auto start = std::chrono::steady_clock::now();
  std::vector<float> logits = seq->append(*ids, /*all_rows=*/true);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::ofstream out(o.out, std::ios::binary);
  if (!out) return fail("--out: cannot open \"" + o.out + "\" for writing");
  out.write(reinterpret_cast<const char*>(logits.data()),
            static_cast<std::streamsize>(logits.size() * sizeof(float)));
  out.close();
  if (!out) return fail("--out: writing \"" + o.out + "\" failed");
  std::fprintf(stderr,
               "wrote logits [%zu, %lld] (float32 little-endian) to %s; forward %.1f ms (%.0f "
               "tokens/s on %s)\n",
               ids->size(), static_cast<long long>(vocab), o.out.c_str(), seconds * 1e3,
               static_cast<double>(ids->size()) / seconds, model.backend().name().c_str());
  return 0;
}

CommandRegistration reg{
    "logits", "Write the fp32 logits of every position of a token sequence to a file",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.footer(
          "Runs the token ids through the model in one prefill (on the CPU backend, fp32, unless\n"
          "--device says otherwise) and writes a [T, vocab] float32 little-endian matrix: row t\n"
          "holds the logits predicting token t+1.\n"
          "Read it back with numpy: np.fromfile(FILE, '<f4').reshape(T, vocab).\n\n"
          "Example:\n"
          "  syv logits --model ~/models/Qwen3-0.6B --tokens 9707,11,1879 --out /tmp/l.bin\n"
          "Compare with transformers: AutoModelForCausalLM.from_pretrained(DIR, "
          "dtype=torch.float32)\n"
          "(ids[None]).logits[0].\n");
      add_model_args(app, o->model);
      add_device_arg(app, o->model.device);
      add_kv_cache_dtype_arg(app, o->kv_cache_dtype);
      app.add_option("--tokens", o->tokens,
                     "Comma-separated token ids, e.g. 1,2,3 (each in [0, vocab)).")
          ->required();
      app.add_option("--out", o->out, "Output file (float32 little-endian, [T, vocab]).")
          ->required();
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
