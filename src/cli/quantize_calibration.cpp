// The calibration pass of cli/quantize_calibration.h.
#include "cli/quantize_calibration.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "backend/available_memory.h"
#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "core/progress_log.h"
#include "io/safetensors.h"
#include "kv/cache_store.h"
#include "model/model.h"
#include "model/quantize_folder.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

// A weight whose inputs are gathered: the tensors it holds rows of, and its width K.
struct Observed {
  const void* data;
  std::vector<std::string> names;  // the quantizable ones
  int64_t k;
  int64_t bytes() const { return k * k * static_cast<int64_t>(sizeof(double)); }
};

Result<std::vector<int32_t>> calibration_tokens(const CalibrationOptions& o, int64_t vocab) {
  std::vector<int32_t> ids = o.token_ids;
  if (ids.empty()) {
    std::ifstream in(o.text_file, std::ios::binary);
    if (!in) return Status::Error("--calibration-file \"" + o.text_file + "\": cannot open");
    std::ostringstream text;
    text << in.rdbuf();
    auto tokenizer = Tokenizer::load(o.model_dir);
    if (!tokenizer.ok()) {
      return Status::Error("--calibration-file needs the model's tokenizer: " +
                           tokenizer.message());
    }
    ids = (*tokenizer)->encode(text.str(), /*add_special_tokens=*/false);
  }
  if (static_cast<int64_t>(ids.size()) > o.max_tokens)
    ids.resize(static_cast<size_t>(o.max_tokens));
  if (ids.size() < 2) {
    return Status::Error("--calibration-file \"" + o.text_file + "\": encodes to " +
                         std::to_string(ids.size()) + " token(s); calibration needs text");
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      return Status::Error("--calibration-file: token " + std::to_string(id) +
                           " is outside the model's vocabulary [0, " + std::to_string(vocab) +
                           ") (tokenizer and model disagree)");
    }
  }
  return ids;
}

// Runs windows, each from position 0, through the model and, where it has one, its MTP head (the
// head's rows as the drafter feeds them: token p + 1 with the target's final hidden state of p),
// so that every linear of both sees its inputs.
class WindowRunner {
 public:
  static constexpr int32_t kPageSize = 64;
  static Result<WindowRunner> create(Model& model, int64_t context) {
    WindowRunner r(model);
    CacheConfig cache;
    cache.page_size = kPageSize;
    cache.num_pages = static_cast<int32_t>((context + kPageSize - 1) / kPageSize);
    cache.num_state_slots = 1;
    SYV_ASSIGN_OR_RETURN(r.store_, make_cache_store(model, cache));
    for (int32_t p = 0; p < cache.num_pages; ++p) r.pages_.push_back(p);
    return r;
  }
  // all_rows: logits for every row (the lm_head's input is then every token's), else the last.
  void run(const std::vector<int32_t>& tokens, bool all_rows) {
    const bool recurrent = model_->cache_spec().has_recurrent_state();
    if (recurrent) store_->reset_slot(0);
    const int32_t T = static_cast<int32_t>(tokens.size());
    Batch b = batch(tokens);
    if (recurrent) b.state_slots = {0};
    if (all_rows) {
      b.logit_rows.clear();
      for (int32_t i = 0; i < T; ++i) b.logit_rows.push_back(i);
    }
    Model::Outputs out;
    model_->forward(b, out);
    if (!model_->has_mtp() || T < 2) return;
    const Batch m = batch(std::vector<int32_t>(tokens.begin() + 1, tokens.end()));
    const Tensor hidden(out.token_hidden.data, out.token_hidden.dtype,
                        {T - 1, out.token_hidden.dim(-1)});
    Model::Outputs head;
    model_->mtp_forward(m, hidden, head);
  }

 private:
  explicit WindowRunner(Model& model) : model_(&model) {}
  // tokens at positions 0.., one sequence over the pages, the last row's logits.
  Batch batch(const std::vector<int32_t>& tokens) const {
    Batch b;
    const int32_t T = static_cast<int32_t>(tokens.size());
    b.token_ids = tokens;
    for (int32_t i = 0; i < T; ++i) b.positions.push_back(i);
    b.seq_starts = {0, T};
    b.context_lens = {T};
    b.page_table = pages_;
    b.max_pages_per_seq = static_cast<int32_t>(pages_.size());
    b.logit_rows = {T - 1};
    return b;
  }
  Model* model_;
  std::unique_ptr<CacheStore> store_;
  std::vector<int32_t> pages_;
};

// Groups of `weights` whose Gram matrices fit `budget` together (one each at least), in order.
std::vector<std::vector<Observed>> passes(const std::vector<Observed>& weights, int64_t budget) {
  std::vector<std::vector<Observed>> out;
  int64_t used = 0;
  for (const Observed& w : weights) {
    if (out.empty() || used + w.bytes() > budget) {
      out.emplace_back();
      used = 0;
    }
    out.back().push_back(w);
    used += w.bytes();
  }
  return out;
}

std::string pass_name(size_t p, size_t passes) {
  return "pass " + std::to_string(p + 1) + "/" + std::to_string(passes);
}

// The Gram matrices' bytes per pass: `requested`, or (0) half the host memory available now, the
// float model loaded (at least 1 GiB; 8 GiB where the kernel does not say). Logged with the passes
// it makes.
int64_t gram_budget(int64_t requested, const std::vector<Observed>& weights) {
  int64_t total = 0;
  for (const Observed& w : weights) total += w.bytes();
  int64_t budget = requested;
  std::string why = "as given";
  if (budget <= 0) {
    const AvailableMemory available = host_available_memory();
    budget = available.bytes > 0 ? std::max<int64_t>(available.bytes / 2, int64_t{1} << 30)
                                 : int64_t{8} << 30;
    why = available.bytes > 0 ? "half of " + format_bytes(available.bytes) + " available"
                              : "host memory unknown";
  }
  SYV_LOG(INFO) << "calibration: " << weights.size() << " weight(s), " << format_bytes(total)
                << " of Gram matrices; " << format_bytes(budget) << " a pass (" << why << ")";
  return budget;
}

}  // namespace

Result<GptqFactors> gather_gptq_factors(const CalibrationOptions& o) {
  if (o.context < 2) {
    return Status::Error("--calibration-context: expected >= 2, found " +
                         std::to_string(o.context));
  }
  if (o.max_tokens < 2) {
    return Status::Error("--calibration-tokens: expected >= 2, found " +
                         std::to_string(o.max_tokens));
  }
  if (!(o.damp > 0.0)) {
    return Status::Error("--gptq-damp: expected > 0, found " + std::to_string(o.damp));
  }
  auto store = WeightStore::open_dir(o.model_dir);
  if (!store.ok()) return Status::Error("--in: " + store.message());
  CpuBackend backend(/*keep_float_weights=*/true);  // bf16 weights: half the memory of f32
  WeightSources sources;
  LoadOptions load;
  load.weight_sources = &sources;
  // The MTP head too, where the checkpoint ships one (its projections are quantized as well).
  for (const std::string& name : store->names()) load.mtp = load.mtp || name.rfind("mtp.", 0) == 0;
  auto model = load_model(o.model_dir, backend, load);
  if (!model.ok() && load.mtp) {  // a head syv cannot load: the rest is still calibrated
    SYV_LOG(WARN) << "calibration: the MTP head does not load (" << model.message()
                  << "); its tensors will be rounded to nearest";
    load.mtp = false;
    sources.clear();
    model = load_model(o.model_dir, backend, load);
  }
  if (!model.ok()) return Status::Error("--in: " + model.message());
  const ModelConfig& config = (*model)->config();
  SYV_ASSIGN_OR_RETURN(std::vector<int32_t> ids, calibration_tokens(o, config.vocab_size));
  int64_t context = o.context;
  if (config.max_position_embeddings > 0)
    context = std::min(context, config.max_position_embeddings);

  std::vector<Observed> weights;
  bool lm_head = false;
  for (const auto& [data, names] : sources) {
    Observed w{data, {}, 0};
    for (const std::string& name : names) {
      const TensorInfo* t = store->find(name);
      if (t == nullptr || t->shape.size() != 2 || !quantize_tensor_name(name, /*lm_head=*/true))
        continue;
      w.names.push_back(name);
      w.k = t->shape[1];
      lm_head = lm_head || name == "lm_head.weight";
    }
    if (!w.names.empty()) weights.push_back(std::move(w));
  }
  // In checkpoint order (the log and the passes' grouping do not depend on a hash map's order),
  // the weight holding more tensors first; a weight whose tensors another already covers (the
  // gated attention's gate rows of q_proj, beside q|k|v: one input) is not gathered twice.
  std::sort(weights.begin(), weights.end(), [](const Observed& a, const Observed& b) {
    return a.names[0] != b.names[0] ? a.names[0] < b.names[0] : a.names.size() > b.names.size();
  });
  std::set<std::string> covered;
  std::erase_if(weights, [&covered](const Observed& w) {
    const bool all = std::all_of(w.names.begin(), w.names.end(),
                                 [&](const std::string& name) { return covered.count(name) > 0; });
    covered.insert(w.names.begin(), w.names.end());
    return all;
  });

  auto runner = WindowRunner::create(**model, context);
  if (!runner.ok()) return Status::Error(runner.message());
  const int64_t n = static_cast<int64_t>(ids.size());
  const std::vector<std::vector<Observed>> groups =
      passes(weights, gram_budget(o.memory_budget_bytes, weights));
  GptqFactors factors;
  int64_t unreached = 0;
  for (size_t p = 0; p < groups.size(); ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unordered_map<const void*, InputGram> grams;
    for (const Observed& w : groups[p]) grams.emplace(w.data, InputGram(w.k));
    backend.set_linear_observer([&grams](const Tensor& x, const Tensor& w) {
      auto it = grams.find(w.data);
      if (it == grams.end()) return;
      SYV_CHECK(x.dtype == DType::F32 && x.dim(-1) == it->second.k())
          << "calibration: input of width " << x.dim(-1) << " for a weight of K " << it->second.k();
      it->second.add(x.as<const float>(), x.numel() / it->second.k());
    });
    int64_t windows = 0;
    ProgressLog progress;
    const int64_t total_windows = (n - 2) / context + 1;
    for (int64_t start = 0; start < n - 1; start += context) {
      const int64_t end = std::min(n, start + context);
      // Every row's logits when lm_head is quantizable: its input is then every token's.
      runner->run(std::vector<int32_t>(ids.begin() + start, ids.begin() + end), lm_head);
      ++windows;
      progress.report("calibration: " + pass_name(p, groups.size()) + ": window", windows,
                      total_windows);
    }
    backend.set_linear_observer(nullptr);
    int64_t factored = 0;
    for (const Observed& w : groups[p]) {
      progress.report("calibration: " + pass_name(p, groups.size()) + ": factor", factored++,
                      static_cast<int64_t>(groups[p].size()));
      const InputGram& gram = grams.at(w.data);
      // An MoE expert the text routed no token to: no inputs to fit (every column would count
      // as dead and be zeroed), so it is rounded to nearest (quantize_folder's log names it).
      if (gram.tokens() == 0) {
        ++unreached;
        continue;
      }
      auto factor = gptq_factor(gram.symmetric(), w.k, o.damp, gram.tokens(), o.act_order);
      if (!factor.ok()) {
        return Status::Error("calibration of " + w.names[0] + ": " + factor.message());
      }
      auto shared = std::make_shared<const GptqFactor>(std::move(factor.value()));
      for (const std::string& name : w.names) factors.emplace(name, shared);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    SYV_LOG(INFO) << "calibration: pass " << (p + 1) << "/" << groups.size() << ": " << windows
                  << " window(s) of up to " << context << " tokens (" << n << " in all), inputs of "
                  << groups[p].size() << " weight(s) gathered and factored in " << seconds << " s";
  }
  if (unreached > 0) {
    SYV_LOG(INFO) << "calibration: " << unreached
                  << " MoE expert weight(s) got no calibration token (the router sent none "
                     "there); they are rounded to nearest";
  }
  return factors;
}

}  // namespace syv::cli
