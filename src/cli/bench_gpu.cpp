// `syv bench decode` and `syv bench prefill`: the model's forward on the CUDA backend at real
// shapes (random weights from a config.json are enough: same bytes, same FLOPs), against the
// machine's own ceilings measured in the same run (a large device copy, a large bf16 GEMM).
//
//   syv bench decode --config tools/bench/configs/qwen3-8b --random-weights --batch 1,8,64,256
//     --context 512,8192  (one command line)
//   syv bench prefill --config tools/bench/configs/qwen3-8b --random-weights --lengths 2048,32768
//     [--attention-variants wgmma128,mma8w]   (the whole prefill once per attention kernel)
//   syv bench prefill --config tools/bench/configs/qwen3-8b --attention-only --lengths 512,32768
//     (the causal attention of one layer alone, every kernel variant, checked against mma8w)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/bench_device.h"
#include "cli/kv_cache_dtype.h"
#include "cli/model_session.h"
#include "cli/tensor_parallel_cli.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/log.h"
#include "io/hf_config.h"
#include "io/quant_config.h"
#include "model/decoder.h"
#include "model/model.h"
#include "model/prepare_model.h"
#if SYV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/memory_plan.h"
#endif

namespace syv::cli {
namespace {

struct Options {
  std::string config;
  bool random_weights = false;
  bool host_embeddings = false;                // --host-embeddings (LoadOptions::host_embeddings)
  std::string quantized_activations = "auto";  // --quantized-activations
  uint64_t seed = 1;
  std::vector<int> batch{1, 8, 64, 256};
  std::vector<int> context{512, 8192};
  std::vector<int> lengths{2048, 32768};
  int steps = 30;
  int warmup = 5;
  bool no_graphs = false;
  double utilization = 0.90;
  // Backend::set_batch_invariant for every timed step.
  bool batch_invariant = false;
  std::string state_dtype = "fp32";             // hybrids: CacheConfig::state_dtype
  std::string kv_cache_dtype = "auto";          // CacheConfig::kv_dtype (cli/kv_cache_dtype.h)
  int tensor_parallel_size = 1;                 // --tensor-parallel-size: ranks on GPUs 0..N-1
  bool attention_only = false;                  // prefill: time the attention op alone
  std::vector<std::string> attention_variants;  // prefill kernels to time (empty: the current one)
};

void add_common(CLI::App& app, Options& o) {
  app.add_option("--config", o.config,
                 "A model folder, or the path of its config.json (tools/bench/configs/...)")
      ->required();
  app.add_flag("--random-weights", o.random_weights,
               "Seeded random weights of the config's shapes instead of the safetensors files\n"
               "(float only: a config with a quantization_config is refused; bench a\n"
               "`syv quantize`d folder instead)");
  app.add_option("--weight-seed", o.seed, "Seed of --random-weights (default 1)");
  app.add_option("--gpu-memory-utilization", o.utilization,
                 "Fraction of device memory the plan may use (default 0.90)")
      ->check(CLI::Range(0.01, 1.0));
  app.add_flag("--batch-invariant", o.batch_invariant,
               "Time the batch-invariant kernels (Backend::set_batch_invariant)");
  app.add_option("--state-dtype", o.state_dtype,
                 "Hybrid models: dtype of the delta-rule state, fp32 (default) or bf16 (as `syv "
                 "serve --state-dtype`; the decode floor counts its bytes)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  add_kv_cache_dtype_arg(app, o.kv_cache_dtype);
  add_tensor_parallel_arg(app, o.tensor_parallel_size);
  add_host_embeddings_arg(app, o.host_embeddings);
  add_quantized_activations_arg(app, o.quantized_activations);
}

#if SYV_HAVE_CUDA

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Stats {
  double median = 0, p10 = 0, p90 = 0;
};
Stats stats_of(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  Stats s;
  s.median = ms[ms.size() / 2];
  s.p10 = ms[ms.size() / 10];
  s.p90 = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
  return s;
}

struct Setup {
  std::unique_ptr<CudaBackend> gpu;  // rank 0's with --tensor-parallel-size
  TpRanks ranks;                     // the other ranks' backends; outlive the model
  std::unique_ptr<Model> model;
  std::unique_ptr<CacheStore> store;  // bound to model
  double copy_gbps = 0, gemm_tflops = 0;
  int64_t linear_params = 0;  // parameters every token multiplies (all linear layers + lm_head)
  int64_t weight_bytes = 0;
  // Bytes of weights a decode step reads (the floor's weight term): 2 x linear_params (bf16), or
  // for a quantized checkpoint the device bytes of its weights (packed data, scales, zeros) less
  // an untied embedding table, which a step reads by rows.
  // (less every routed expert of a mixture of experts: a step reads the experts its tokens route
  // to, counted per step by CudaBackend::moe_experts_routed(), expert_bytes each)
  double step_weight_bytes = 0;
  double expert_bytes = 0;  // one routed expert's gate, up and down in bf16
  int64_t kv_per_token = 0;
  int64_t state_per_seq = 0;       // recurrent state bytes of one sequence (hybrids; 0 otherwise)
  DType state_dtype = DType::F32;  // of the delta-rule state (--state-dtype)
  std::optional<DType> kv_dtype;   // of the paged K/V (--kv-cache-dtype; unset: bf16)
  int32_t state_slots = 0;         // slots the store holds (the largest batch)
  std::string name;
};

// One routed expert's parameters (gate, up, down), and the MoE layers' count.
int64_t expert_params(const ModelConfig& c) {
  return 3 * c.hidden_size * c.moe_intermediate_size;
}
int64_t moe_layers(const ModelConfig& c) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) n += c.layer_is_moe(l) ? 1 : 0;
  return n;
}

// Parameters every token multiplies: each layer's linears (and conv taps) plus the lm_head. For the
// hybrid families: a gated attention layer's q_proj is twice as tall (query and gate), a Gated
// DeltaNet layer has in_proj_qkv, in_proj_z, in_proj_b/a, out_proj and the conv1d taps; a MoE
// layer's MLP is its router, shared expert (and its gate) and the top_k experts the token uses.
int64_t linear_params_per_token(const ModelConfig& c) {
  const int64_t H = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, I = c.intermediate_size;
  const bool gated = !c.layer_types.empty();  // the hybrid families gate their attention
  const GdnShape g = gdn_shape(c);
  int64_t n = c.vocab_size * H;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool full =
        c.layer_types.empty() || c.layer_types[static_cast<size_t>(l)] == LayerType::kFullAttention;
    if (full) {
      n += H * q * (gated ? 2 : 1) + 2 * H * kv + q * H;
    } else {
      n += H * (g.conv_dim() + g.value_dim() + 2 * g.num_v_heads) + g.value_dim() * H +
           g.conv_dim() * c.linear_conv_kernel_dim;
    }
    if (c.layer_is_moe(l)) {
      n += c.num_experts * H + H + 3 * H * c.shared_expert_intermediate_size +
           c.num_experts_per_tok * expert_params(c);
    } else {
      n += 3 * H * I;
    }
  }
  return n;
}

// FLOPs of one token's attention-like work per layer at context `ctx`: 4 Hq D ctx for each full
// attention layer, and 6 Hv dk dv for each Gated DeltaNet layer (the recurrent form: S^T k, S^T q
// and the rank-1 update, 2 FLOPs per state element each).
double mixer_flops_per_token(const ModelConfig& c, double ctx) {
  const int64_t full = c.layer_types.empty() ? c.num_hidden_layers : c.num_full_attention_layers();
  const GdnShape g = gdn_shape(c);
  return 4.0 * full * c.num_attention_heads * c.head_dim * ctx +
         6.0 * (c.num_hidden_layers - full) * g.num_v_heads * g.k_head_dim * g.v_head_dim;
}

// CudaBackend::fill_random_on_allocate on every rank's backend (the ranks' KV pools are
// allocated when the model binds the store).
void fill_random_on_allocate(Setup& s, uint64_t seed) {
  s.gpu->fill_random_on_allocate(seed);
  for (auto& b : s.ranks.owned) dynamic_cast<CudaBackend&>(*b).fill_random_on_allocate(seed);
}

// Replaces the model's cache store with one of `cc` (the old one is freed first).
Status rebuild_store(Setup& s, const CacheConfig& cc) {
  s.store.reset();
  SYV_ASSIGN_OR_RETURN(s.store, CacheStore::create(s.model->cache_spec(), cc, *s.gpu));
  s.model->bind_cache(*s.store);
  // Random bytes are no valid scales (NaN, inf): a quantized pool's scales start at 1, so its
  // random values read as themselves (random fp8 bytes include NaN codes; timing ignores values).
  const std::vector<LayerCacheKind>& kinds = s.store->spec().layer_kinds;
  std::vector<float> ones;
  std::vector<uint16_t> ones_f16;
  for (size_t l = 0; l < kinds.size(); ++l) {
    if (kinds[l] != LayerCacheKind::kPagedKV) continue;
    const KvCacheView kv = s.store->kv_view(static_cast<int32_t>(l));
    if (!kv.scaled()) continue;
    const size_t n = static_cast<size_t>(kv.k_scales.numel());
    const void* one = nullptr;
    if (kv.k_scales.dtype == DType::F16) {  // int4 (kv_scale_dtype)
      ones_f16.assign(n, f32_to_f16(1.0f));
      one = ones_f16.data();
    } else {
      ones.assign(n, 1.0f);
      one = ones.data();
    }
    s.gpu->upload(kv.k_scales.data, one, kv.k_scales.bytes());
    s.gpu->upload(kv.v_scales.data, one, kv.v_scales.bytes());
  }
  return Status::Ok();
}

// Loads the model, measures the ceilings, logs each start-up phase with its time.
int setup(const Options& o, Setup& s) {
  namespace fs = std::filesystem;
  std::string dir = o.config;
  if (fs::is_regular_file(dir)) dir = fs::path(dir).parent_path().string();
  if (!fs::is_directory(dir))
    return fail("--config: \"" + o.config + "\" is neither a folder nor a file");
  s.name = fs::path(dir).filename().string();
  if (cuda_device_count() == 0) return fail("no CUDA device: `syv bench` needs a GPU");
  auto t0 = std::chrono::steady_clock::now();
  s.gpu = make_cuda_backend(0);
  s.gpu->set_batch_invariant(o.batch_invariant);
  const GpuMemoryInfo mem = s.gpu->memory_info();
  std::printf("device: %s, %d SMs, %.1f GiB (%.1f GiB free); backend up in %.2f s\n",
              s.gpu->device_name().c_str(), s.gpu->sm_count(), mem.total_bytes / 1073741824.0,
              mem.free_bytes / 1073741824.0, seconds_since(t0));
  std::printf("batch-invariant mode: %s\n", o.batch_invariant ? "on" : "off");
  if (Status st = apply_quantized_activations(*s.gpu, o.quantized_activations, /*log=*/false);
      !st.ok())
    return fail(st.message());
  std::printf("quantized activations: %s\n", o.quantized_activations.c_str());
  t0 = std::chrono::steady_clock::now();
  s.copy_gbps = s.gpu->measure_copy_gbps(size_t{2} << 30, 20);
  s.gemm_tflops = s.gpu->measure_gemm_tflops(8192, 8192, 8192, 20);
  std::printf(
      "ceilings (measured now): device copy %.0f GB/s (read + write), bf16 GEMM %.0f TFLOP/s"
      " (8192^3); %.2f s\n",
      s.copy_gbps, s.gemm_tflops, seconds_since(t0));
  t0 = std::chrono::steady_clock::now();
  const size_t before = s.gpu->allocated_bytes(), scratch_before = s.gpu->peak_scratch_bytes();
  LoadOptions lo;
  lo.random_weights = o.random_weights;
  lo.seed = o.seed;
  lo.host_embeddings = o.host_embeddings;
  auto prepared = prepare_model(dir, *s.gpu, lo);
  if (!prepared.ok()) return fail("--config: " + prepared.message());
  if (Status st = check_tp_model(prepared->config, o.tensor_parallel_size); !st.ok())
    return fail(st.message());
  auto ranks = make_tp_ranks(*s.gpu, o.tensor_parallel_size);
  if (!ranks.ok()) return fail(ranks.message());
  s.ranks = std::move(*ranks);
  if (Status st = apply_quantized_activations(s.ranks.owned, o.quantized_activations); !st.ok())
    return fail(st.message());
  auto model = load_tp_model(*prepared, s.ranks, lo);
  if (!model.ok()) return fail("--config: " + model.message());
  s.model = std::move(*model);
  s.gpu->synchronize();
  // (less the scratch the load sized: a quantized model's dequantization buffer)
  s.weight_bytes = static_cast<int64_t>(s.gpu->allocated_bytes() - before) -
                   static_cast<int64_t>(s.gpu->peak_scratch_bytes() - scratch_before);
  std::printf("weights: %.2f GB on the device, loaded in %.2f s%s\n", s.weight_bytes / 1e9,
              seconds_since(t0), o.random_weights ? " (random)" : "");
  const ModelConfig& mc = s.model->config();
  s.linear_params = linear_params_per_token(mc);
  s.expert_bytes = 2.0 * double(expert_params(mc));
  s.step_weight_bytes =
      2.0 * double(s.linear_params - moe_layers(mc) * mc.num_experts_per_tok * expert_params(mc));
  if (const int n = o.tensor_parallel_size; n > 1) {
    // One rank's floor: its 1/n of every layer's weights (and of each routed expert) and the
    // whole embedding row / lm_head (replicated); the KV bytes are already the rank's (its spec).
    const double head = 2.0 * double(mc.vocab_size) * double(mc.hidden_size);
    s.step_weight_bytes = (s.step_weight_bytes - head) / n + head;
    s.expert_bytes /= n;
    std::printf(
        "tensor parallel: %d ranks (GPUs 0..%d); the floor is one rank's (1/%d of the layers' "
        "weights, the whole lm_head, its KV heads), timed on rank 0's stream (its all-reduces "
        "wait for the other ranks); a graph step replays every rank's own graph\n",
        n, n - 1, n);
  }
  if (mc.is_moe())
    std::printf(
        "decode floor: %.2f GB of weights per step besides the routed experts, plus %.1f MB per "
        "expert a step routes to (counted on the device, summed over its %lld MoE layers)\n",
        s.step_weight_bytes / 1e9, s.expert_bytes / 1e6, static_cast<long long>(moe_layers(mc)));
  if (mc.quant.quantized() && !o.random_weights) {
    // Experts the backend keeps quantized: one expert's packed bytes. The counts with the experts
    // kept and dequantized differ only in the experts (every one of the checkpoint's, an MTP
    // head's included), all of one shape.
    if (mc.is_moe() && s.gpu->keeps_moe_experts_quantized() && prepared->store) {
      const std::optional<int64_t> saved = moe_experts_quantized_saving(
          *prepared->arch, mc, &*prepared->store, [](DType) { return DType::BF16; });
      std::set<std::string> experts;  // "model.layers.3.mlp.experts.17"
      for (const std::string& name : prepared->store->names()) {
        const size_t at = name.find(".down_proj.");
        if (name.find(".mlp.experts.") != std::string::npos && at != std::string::npos)
          experts.insert(name.substr(0, at));
      }
      if (saved && !experts.empty()) {
        s.expert_bytes -= double(*saved) / double(experts.size());
        std::printf("decode floor: the experts kept quantized, %.2f MB per expert routed to\n",
                    s.expert_bytes / 1e6);
      }
    }
    const double table =
        mc.tie_word_embeddings ? 0.0 : 2.0 * double(mc.vocab_size) * double(mc.hidden_size);
    s.step_weight_bytes = static_cast<double>(s.weight_bytes) - table -
                          s.expert_bytes * double(moe_layers(mc) * mc.num_experts);
    std::printf(
        "decode floor: %.2f GB of weights per step (%s: the device bytes of the weights, "
        "packed data + scales + zeros, less an untied embedding table)\n",
        s.step_weight_bytes / 1e9, describe_quant_config(mc.quant).c_str());
  }
  auto kv_dtype = resolve_kv_cache_dtype(o.kv_cache_dtype, *s.gpu, s.model->config());
  if (!kv_dtype.ok()) return fail(kv_dtype.message());
  s.kv_dtype = *kv_dtype;
  const CacheSpec declared = s.model->cache_spec();
  s.kv_per_token = (s.kv_dtype ? declared.with_kv_dtype(*s.kv_dtype) : declared).kv_bytes_per_token;
  s.state_dtype = o.state_dtype == "bf16" ? DType::BF16 : DType::F32;
  s.state_per_seq = s.model->cache_spec().with_state_dtype(s.state_dtype).state_bytes_per_seq;
  if (s.state_per_seq > 0)
    std::printf("recurrent state: %s, %.1f MB per sequence\n", o.state_dtype.c_str(),
                s.state_per_seq / 1e6);
  return 0;
}

// A cache of `pages` 64-token pages and, for hybrids, s.state_slots recurrent-state slots.
CacheConfig cache_config(const Setup& s, int64_t pages) {
  CacheConfig cc;
  cc.page_size = 64;
  cc.num_pages = static_cast<int32_t>(pages);
  cc.num_state_slots = s.state_per_seq > 0 ? s.state_slots : 0;
  cc.kv_dtype = s.kv_dtype;
  if (s.state_per_seq > 0 && s.state_dtype != DType::F32) cc.state_dtype = s.state_dtype;
  return cc;
}

// Pages for `seqs` sequences of up to `tokens` positions each, plus the plan line.
int allocate_pool(const Options& o, Setup& s, int64_t pages_needed, size_t activation_peak,
                  int64_t* pages_out) {
  MemoryPlanInput in;
  in.total_bytes = s.gpu->memory_info().total_bytes;
  in.utilization = o.utilization;
  in.weight_bytes = static_cast<size_t>(s.weight_bytes);
  in.activation_peak_bytes = activation_peak;
  in.other_bytes = runtime_reserve_bytes(s.gpu->peak_scratch_bytes());
  in.state_bytes_per_slot = s.state_per_seq;
  in.state_slots = s.state_per_seq > 0 ? s.state_slots : 0;
  in.kv_bytes_per_token = s.kv_per_token;
  in.page_size = 64;
  in.max_position = s.model->config().max_position_embeddings;
  auto plan = plan_memory(in);
  if (!plan.ok()) return fail(plan.message());
  std::printf("%s (activation peak %.2f GB measured)\n", plan->summary().c_str(),
              activation_peak / 1e9);
  CacheConfig cc = cache_config(s, std::min<int64_t>(plan->pages, pages_needed));
  fill_random_on_allocate(s, 12345);  // the KV pool holds random bf16, never zeros
  Status st = rebuild_store(s, cc);
  fill_random_on_allocate(s, 0);
  if (!st.ok()) return fail(st.message());
  *pages_out = cc.num_pages;
  return 0;
}

Batch decode_batch(int batch, int context, int64_t pages_per_seq, int first_page = 0) {
  Batch b;
  b.max_pages_per_seq = static_cast<int32_t>(pages_per_seq);
  b.seq_starts.push_back(0);
  for (int s = 0; s < batch; ++s) {
    b.token_ids.push_back((s * 7919 + 13) % 150000);
    b.positions.push_back(context - 1);
    b.seq_starts.push_back(s + 1);
    b.context_lens.push_back(context);
    for (int64_t j = 0; j < pages_per_seq; ++j)
      b.page_table.push_back(static_cast<int32_t>(first_page + s * pages_per_seq + j));
    b.logit_rows.push_back(s);
    b.state_slots.push_back(s);  // hybrids: slot s (ignored by models without recurrent state)
  }
  return b;
}

// Measures the activation peak: bytes the backend allocates during one step of `batch`.
size_t measure_activation_peak(Setup& s, const Batch& batch) {
  const size_t before = s.gpu->allocated_bytes();
  s.model->forward(batch);
  s.gpu->synchronize();
  return s.gpu->allocated_bytes() - before;
}

Batch prefill_batch(int n, int64_t pages_per_seq) {
  Batch b;
  b.max_pages_per_seq = static_cast<int32_t>(pages_per_seq);
  for (int i = 0; i < n; ++i) {
    b.token_ids.push_back((i * 7919 + 13) % 150000);
    b.positions.push_back(i);
  }
  b.seq_starts = {0, n};
  b.context_lens = {n};
  for (int64_t j = 0; j < pages_per_seq; ++j) b.page_table.push_back(static_cast<int32_t>(j));
  b.logit_rows = {n - 1};
  b.state_slots = {0};
  return b;
}

// A small random KV pool for the warm-up steps that size the workspace and measure the peak.
int small_pool(Setup& s, int64_t pages) {
  CacheConfig small = cache_config(s, pages);
  fill_random_on_allocate(s, 999);
  Status st = rebuild_store(s, small);
  fill_random_on_allocate(s, 0);
  return st.ok() ? 0 : fail(st.message());
}

void emit(std::vector<std::string>& rows, const char* line) {
  rows.push_back(line);
  std::printf("%s\n", line);
  std::fflush(stdout);
}

// Prefill attention kernels named by --attention-variants (each checked), or the current one.
std::vector<int> attention_variants(const Options& o) {
  std::vector<int> vs;
  for (const std::string& name : o.attention_variants) {
    const int v = cuda::find_prefill_attention_variant(name);
    if (v < 0) {
      std::string known;
      for (int i = 0; i < cuda::prefill_attention_variant_count(); ++i)
        known += std::string(i ? ", " : "") + cuda::prefill_attention_variant_name(i);
      fail("--attention-variants: unknown kernel \"" + name + "\" (expected one of " + known + ")");
      return {};
    }
    vs.push_back(v);
  }
  if (o.attention_variants.empty()) vs.push_back(cuda::prefill_attention_variant());
  return vs;
}

// With SYV_BENCH_PROFILE_RANGE set, runs `work` once more inside the profiler's capture range, so
// that a profiler started with capture off records exactly that (one prefill of each length, one
// eager decode step of each batch and context: tools/device/prefill_kernel_split.sh,
// decode_kernel_split.sh).
template <typename F>
void profile_once(Setup& s, F&& work) {
  if (std::getenv("SYV_BENCH_PROFILE_RANGE") == nullptr) return;
  s.gpu->synchronize();
  cuda_profiler_range(true);
  work();
  s.gpu->synchronize();
  cuda_profiler_range(false);
}

// Prefill points on an allocated pool of at least ceil(max length / 64) pages, once per attention
// kernel. The FLOPs are those of the linears for every token (lm_head included, as in the notes'
// floors) plus the causal attention, 4 Hq D n^2 / 2 per layer.
void prefill_points(const Options& o, Setup& s, std::vector<std::string>& rows,
                    const std::vector<int>& variants) {
  const ModelConfig& c = s.model->config();
  const int max_len = *std::max_element(o.lengths.begin(), o.lengths.end());
  const int64_t pps = (max_len + 63) / 64;
  const int initial = cuda::prefill_attention_variant();
  for (int v : variants) {
    cuda::set_prefill_attention_variant(v);
    for (int n : o.lengths) {
      Batch batch = prefill_batch(n, pps);
      const int iters = n >= 16384 ? 3 : 10;
      Stats st = stats_of(s.gpu->time_ms([&] { s.model->forward(batch); }, 1, iters));
      profile_once(s, [&] { s.model->forward(batch); });
      const double lin = 2.0 * double(s.linear_params) * n;
      // Causal: token i attends to i + 1 keys, n^2 / 2 on average; the delta rule per token.
      const double attn = mixer_flops_per_token(c, n / 2.0) * n;
      const double tflops = (lin + attn) / (st.median * 1e-3) / 1e12;
      char line[512];
      std::snprintf(line, sizeof line,
                    "| prefill | %s | %s | %6d tokens | %10.0f tok/s | %.1f ms (p10 %.1f p90 %.1f) "
                    "| %.1f TFLOP/s effective (%.0f%% linear) | %.1f%% of measured GEMM |",
                    s.name.c_str(), cuda::prefill_attention_variant_name(v), n, n / st.median * 1e3,
                    st.median, st.p10, st.p90, tflops, 100.0 * lin / (lin + attn),
                    100.0 * tflops / s.gemm_tflops);
      emit(rows, line);
    }
  }
  cuda::set_prefill_attention_variant(initial);
}

void print_summary(const Setup& s, const std::vector<std::string>& rows) {
  std::printf("\nsummary (%s; copy %.0f GB/s, GEMM %.0f TFLOP/s measured in this run)\n",
              s.gpu->device_name().c_str(), s.copy_gbps, s.gemm_tflops);
  for (auto& r : rows) std::printf("%s\n", r.c_str());
}

// Programmatic dependent launch on or off on every rank's backend (rank 0's is s.gpu).
void set_pdl(Setup& s, bool on) {
  for (Backend* b : s.ranks.backends) {
    auto* gpu = dynamic_cast<CudaBackend*>(b);
    SYV_CHECK(gpu != nullptr) << "bench decode: rank backend " << b->name() << " is not CUDA";
    gpu->set_pdl(on);
  }
}

int run_decode(const Options& o) {
  Setup s;
  if (int rc = setup(o, s)) return rc;
  const ModelConfig& c = s.model->config();
  const int max_batch = *std::max_element(o.batch.begin(), o.batch.end());
  const int max_len = o.lengths.empty() ? 0 : *std::max_element(o.lengths.begin(), o.lengths.end());
  const int64_t prefill_pages = (max_len + 63) / 64;
  s.state_slots = max_batch;
  auto t0 = std::chrono::steady_clock::now();
  // Warm-up at the largest batch (and the longest prompt, with --lengths) on a small pool: sizes
  // the workspace and measures the activation peak the plan reserves.
  if (int rc = small_pool(s, std::max<int64_t>(max_batch, prefill_pages))) return rc;
  size_t peak = measure_activation_peak(s, decode_batch(max_batch, 1, 1));
  if (max_len > 0) peak += measure_activation_peak(s, prefill_batch(max_len, prefill_pages));
  std::printf("warm-up steps (batch %d%s): %.2f s\n", max_batch,
              max_len ? (", prompt " + std::to_string(max_len)).c_str() : "", seconds_since(t0));
  int64_t needed = prefill_pages;
  for (int b : o.batch)
    for (int ctx : o.context) needed = std::max<int64_t>(needed, int64_t{b} * ((ctx + 63) / 64));
  int64_t pages = 0;
  t0 = std::chrono::steady_clock::now();
  if (int rc = allocate_pool(o, s, needed, peak, &pages)) return rc;
  std::printf("KV pool allocated: %lld pages in %.2f s\n", static_cast<long long>(pages),
              seconds_since(t0));

  DeviceBuffer ids_buf = s.gpu->allocate(static_cast<size_t>(max_batch) * 4);
  std::vector<std::string> rows;
  for (int ctx : o.context) {
    for (int b : o.batch) {
      const int64_t pps = (ctx + 63) / 64;
      char line[640];
      if (int64_t{b} * pps > pages) {
        std::snprintf(line, sizeof line,
                      "| decode | %s | %4d | %6d | skipped: needs %lld KV pages, pool has %lld |",
                      s.name.c_str(), b, ctx, static_cast<long long>(b * pps),
                      static_cast<long long>(pages));
        emit(rows, line);
        continue;
      }
      Batch batch = decode_batch(b, ctx, pps);
      Tensor ids = ids_buf.view(DType::I32, {b});
      Model::Outputs out;
      auto argmax = [&] { s.gpu->argmax(out.logits, ids); };  // on rank 0's stream
      auto step = [&] {
        s.model->forward(batch, out);
        argmax();
      };
      const bool pdl = s.gpu->pdl();
      // The experts one step reads (the same every step: the batch does not change).
      const uint64_t routed_before = s.gpu->moe_experts_routed();
      step();
      const double experts_read = double(s.gpu->moe_experts_routed() - routed_before);
      Stats eager = stats_of(s.gpu->time_ms(step, o.warmup, o.steps));
      profile_once(s, step);
      Stats graph = eager, graph_nopdl = eager;
      if (!o.no_graphs) {  // every rank's graph (Model::capture_forward), replayed in step
        const int gid = s.model->capture_forward(batch, out, argmax);
        graph = stats_of(s.gpu->time_ms([&] { s.model->replay_graph(gid); }, 3, o.steps));
        if (pdl) {  // the same graph without programmatic dependent launch, for comparison
          set_pdl(s, false);
          const int gid2 = s.model->capture_forward(batch, out, argmax);
          set_pdl(s, true);
          graph_nopdl = stats_of(s.gpu->time_ms([&] { s.model->replay_graph(gid2); }, 3, o.steps));
        }
      }
      std::vector<int32_t> host_ids(static_cast<size_t>(b));
      s.gpu->download(host_ids.data(), ids.data, host_ids.size() * 4);
      for (int32_t id : host_ids)
        if (id < 0 || id >= c.vocab_size)
          return fail("decode produced token id " + std::to_string(id));
      const double best = std::min(eager.median, graph.median);
      // Weights once (the routed experts: those the step reads), each sequence's K/V, and its
      // recurrent state read and written.
      const double bytes = s.step_weight_bytes + experts_read * s.expert_bytes +
                           double(b) * ctx * static_cast<double>(s.kv_per_token) +
                           2.0 * double(b) * static_cast<double>(s.state_per_seq);
      const double floor_ms = bytes / (s.copy_gbps * 1e9) * 1e3;
      const double flops =
          2.0 * double(s.linear_params) * b + mixer_flops_per_token(c, double(ctx)) * b;
      std::snprintf(line, sizeof line,
                    "| decode | %s | %4d | %6d | %9.1f tok/s | eager %.3f ms (p10 %.3f p90 %.3f) "
                    "| graph %.3f ms (p10 %.3f p90 %.3f) | graph w/o PDL %.3f ms | floor %.3f ms "
                    "(%.2f GB) | %.1f%% of floor | %.1f TFLOP/s |",
                    s.name.c_str(), b, ctx, b / best * 1e3, eager.median, eager.p10, eager.p90,
                    graph.median, graph.p10, graph.p90, graph_nopdl.median, floor_ms, bytes / 1e9,
                    100.0 * floor_ms / best, flops / (best * 1e-3) / 1e12);
      std::string row = line;
      if (c.is_moe()) {
        std::snprintf(line, sizeof line, " %.0f experts read (%.1f per MoE layer) |", experts_read,
                      experts_read / double(std::max<int64_t>(moe_layers(c), 1)));
        row += line;
      }
      emit(rows, row.c_str());
    }
  }
  if (max_len > 0) prefill_points(o, s, rows, {cuda::prefill_attention_variant()});
  print_summary(s, rows);
  return 0;
}

// Relative L2 distance of two bf16 device buffers of n elements (downloaded).
double rel_l2_bf16(CudaBackend& gpu, const void* got, const void* ref, int64_t n) {
  std::vector<uint16_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  gpu.download(a.data(), got, a.size() * 2);
  gpu.download(b.data(), ref, b.size() * 2);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]);
    if (!std::isfinite(x)) return INFINITY;
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// `syv bench prefill --attention-only`: one layer's causal prefill attention (the config's heads
// and head_dim, one prompt of n tokens, a random paged K/V cache of 64-token pages) per kernel
// variant, timed alone, its output checked against the mma8w kernel's (mma.sync, an
// implementation independent of the default wgmma128's).
int run_attention_only(const Options& o) {
  namespace fs = std::filesystem;
  std::string dir = o.config;
  if (fs::is_regular_file(dir)) dir = fs::path(dir).parent_path().string();
  auto config = load_model_config(dir);
  if (!config.ok()) return fail("--config: " + config.message());
  if (cuda_device_count() == 0) return fail("no CUDA device: `syv bench` needs a GPU");
  const std::vector<int> variants = [&] {
    if (!o.attention_variants.empty()) return attention_variants(o);
    std::vector<int> all;
    for (int v = 0; v < cuda::prefill_attention_variant_count(); ++v) all.push_back(v);
    return all;
  }();
  if (variants.empty()) return 1;  // unknown name, reported
  for (int n : o.lengths)
    if (n <= 16) return fail("--lengths: attention-only needs prompts of more than 16 tokens");
  const ModelConfig& c = *config;
  const int64_t hq = c.num_attention_heads, hk = c.num_key_value_heads, D = c.head_dim;
  auto gpu = make_cuda_backend(0);
  const double gemm = gpu->measure_gemm_tflops(8192, 8192, 8192, 20);
  std::printf(
      "device: %s; bf16 GEMM %.0f TFLOP/s measured now; attention of %s: %lld q heads, "
      "%lld kv heads, head_dim %lld, %d layers\n",
      gpu->device_name().c_str(), gemm, fs::path(dir).filename().string().c_str(),
      static_cast<long long>(hq), static_cast<long long>(hk), static_cast<long long>(D),
      static_cast<int>(c.num_hidden_layers));
  const int max_len = *std::max_element(o.lengths.begin(), o.lengths.end());
  const int64_t pages = (max_len + 63) / 64;
  const int64_t kv_elems = pages * 64 * hk * D, q_elems = int64_t{max_len} * hq * D;
  DeviceBuffer kb = gpu->allocate(kv_elems * 2), vb = gpu->allocate(kv_elems * 2);
  DeviceBuffer qb = gpu->allocate(q_elems * 2), ob = gpu->allocate(q_elems * 2);
  DeviceBuffer rb = gpu->allocate(q_elems * 2);
  gpu->fill_random(kb.data(), DType::BF16, kv_elems, 11, 1.f);
  gpu->fill_random(vb.data(), DType::BF16, kv_elems, 12, 1.f);
  gpu->fill_random(qb.data(), DType::BF16, q_elems, 13, 4.f);  // peaked softmax rows
  const Tensor kt = kb.view(DType::BF16, {pages, 64, hk, D});
  const Tensor vt = vb.view(DType::BF16, {pages, 64, hk, D});
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  const int reference = cuda::find_prefill_attention_variant("mma8w");
  const int initial = cuda::prefill_attention_variant();
  std::vector<std::string> rows;
  for (int n : o.lengths) {
    Batch batch = prefill_batch(n, pages);
    BatchMeta meta = gpu->prepare_batch(batch, 64);
    const Tensor qt = qb.view(DType::BF16, {n, hq, D});
    Tensor ot = ob.view(DType::BF16, {n, hq, D}), rt = rb.view(DType::BF16, {n, hq, D});
    cuda::set_prefill_attention_variant(reference);
    gpu->paged_attention(qt, kt, vt, scale, meta, rt);  // the reference output
    const double flops = 4.0 * hq * D * double(n) * n / 2.0;
    const int iters = n >= 16384 ? 5 : 20;
    for (int v : variants) {
      cuda::set_prefill_attention_variant(v);
      Stats st = stats_of(
          gpu->time_ms([&] { gpu->paged_attention(qt, kt, vt, scale, meta, ot); }, 2, iters));
      const double err = rel_l2_bf16(*gpu, ot.data, rt.data, ot.numel());
      const double tflops = flops / (st.median * 1e-3) / 1e12;
      char line[512];
      std::snprintf(
          line, sizeof line,
          "| attention | %-9s | %6d tokens | %8.3f ms/layer (p10 %.3f p90 %.3f) | "
          "x%d layers %8.1f ms | %6.1f TFLOP/s | %5.1f%% of GEMM | rel L2 vs mma8w %.2e |",
          cuda::prefill_attention_variant_name(v), n, st.median, st.p10, st.p90,
          static_cast<int>(c.num_hidden_layers), st.median * c.num_hidden_layers, tflops,
          100.0 * tflops / gemm, err);
      rows.push_back(line);
      std::printf("%s\n", line);
      std::fflush(stdout);
    }
  }
  cuda::set_prefill_attention_variant(initial);
  std::printf("\nsummary (%s; GEMM %.0f TFLOP/s measured in this run)\n",
              gpu->device_name().c_str(), gemm);
  for (auto& r : rows) std::printf("%s\n", r.c_str());
  return 0;
}

int run_prefill(const Options& o) {
  if (o.attention_only) return run_attention_only(o);
  const std::vector<int> variants = attention_variants(o);
  if (variants.empty()) return 1;  // unknown name, reported
  Setup s;
  if (int rc = setup(o, s)) return rc;
  const int max_len = *std::max_element(o.lengths.begin(), o.lengths.end());
  const int64_t pps = (max_len + 63) / 64;
  s.state_slots = 1;
  if (int rc = small_pool(s, pps)) return rc;
  auto t0 = std::chrono::steady_clock::now();
  const size_t peak = measure_activation_peak(s, prefill_batch(max_len, pps));
  std::printf("warm-up prefill (%d tokens): %.2f s\n", max_len, seconds_since(t0));
  int64_t pages = 0;
  if (int rc = allocate_pool(o, s, pps, peak, &pages)) return rc;
  std::vector<std::string> rows;
  prefill_points(o, s, rows, variants);
  print_summary(s, rows);
  return 0;
}

// `syv bench kernels`: every linear shape of the config at 1 and 4 tokens, each GEMV launch shape
// and cuBLASLt, over rotating weight copies (more than the L2 holds), in GB/s of weights read.
int run_kernels(const Options& o) {
  auto dev = open_bench_device(o.config);
  if (!dev.ok()) return fail(dev.message());
  CudaBackend* gpu = dev->gpu.get();
  const double copy_gbps = dev->copy_gbps;
  std::vector<std::string> rows;
  for (const LinearShape& sh : linear_shapes(dev->config)) {
    if (std::string(sh.name) == "qkv") continue;  // its parts are timed
    const size_t wbytes = static_cast<size_t>(sh.n * sh.k * 2);
    const int copies = static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / wbytes + 1));
    DeviceBuffer wb = gpu->allocate(wbytes * copies);
    gpu->fill_random(wb.data(), DType::BF16, static_cast<int64_t>(wbytes / 2) * copies, 5, 0.05f);
    for (int tokens : {1, 4}) {
      DeviceBuffer xb = gpu->allocate(static_cast<size_t>(tokens * sh.k * 2));
      DeviceBuffer ob = gpu->allocate(static_cast<size_t>(tokens * sh.n * 2));
      gpu->fill_random(xb.data(), DType::BF16, tokens * sh.k, 6, 1.f);
      Tensor x(xb.data(), DType::BF16, {tokens, sh.k});
      Tensor out(ob.data(), DType::BF16, {tokens, sh.n});
      for (int v = -1; v < 4; ++v) {  // -1: cuBLASLt
        if (v < 0) {
          gpu->set_gemv_max_tokens(0);
        } else {
          gpu->set_gemv_max_tokens(4);
          gpu->set_gemv_variant(v);
        }
        int next = 0;
        auto step = [&] {  // 8 calls on successive weight copies, as consecutive layers would
          for (int r = 0; r < 8; ++r) {
            Tensor w(static_cast<char*>(wb.data()) + wbytes * (next++ % copies), DType::BF16,
                     {sh.n, sh.k});
            gpu->linear(x, w, Tensor(), out);
          }
        };
        Stats st = stats_of(gpu->time_ms(step, 3, 20));
        const double us = st.median * 1e3 / 8;
        const double gbps = wbytes / (us * 1e-6) / 1e9;
        char line[256];
        std::snprintf(line, sizeof line,
                      "| gemv | %-8s | N %6lld | K %6lld | T %d | %-8s | %8.2f us | %6.0f GB/s | "
                      "%5.1f%% of copy |",
                      sh.name, static_cast<long long>(sh.n), static_cast<long long>(sh.k), tokens,
                      v < 0 ? "cublasLt" : (std::string("gemv v") + std::to_string(v)).c_str(), us,
                      gbps, 100.0 * gbps / copy_gbps);
        rows.push_back(line);
        std::printf("%s\n", line);
      }
    }
  }
  gpu->set_gemv_max_tokens(4);
  gpu->set_gemv_variant(4);  // back to auto
  return 0;
}

}  // namespace

Result<BenchDevice> open_bench_device(const std::string& config_path) {
  namespace fs = std::filesystem;
  std::string dir = config_path;
  if (fs::is_regular_file(dir)) dir = fs::path(dir).parent_path().string();
  auto config = load_model_config(dir);
  if (!config.ok()) return Status::Error("--config: " + config.message());
  if (cuda_device_count() == 0) return Status::Error("no CUDA device: `syv bench` needs a GPU");
  BenchDevice d;
  d.config = std::move(*config);
  d.gpu = make_cuda_backend(0);
  d.copy_gbps = d.gpu->measure_copy_gbps(size_t{2} << 30, 20);
  std::printf("device: %s; copy %.0f GB/s measured now\n", d.gpu->device_name().c_str(),
              d.copy_gbps);
  return d;
}

std::vector<LinearShape> linear_shapes(const ModelConfig& c) {
  const int64_t H = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, I = c.intermediate_size;
  return {{"q_proj", q, H},      {"k_proj", kv, H}, {"qkv", q + 2 * kv, H},      {"o_proj", H, q},
          {"gate_up", 2 * I, H}, {"down", H, I},    {"lm_head", c.vocab_size, H}};
}

namespace {

#else

int run_decode(const Options&) {
  return fail("`syv bench decode` needs the CUDA backend; this syv was built without CUDA",
              "configure with -DSYV_CUDA=ON on a machine with nvcc");
}
int run_prefill(const Options& o) {
  return run_decode(o);
}
int run_kernels(const Options& o) {
  return run_decode(o);
}

#endif

BenchRegistration decode_reg{
    "decode", "Decode steps on the GPU: tok/s vs the bandwidth floor (bytes moved / measured copy)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      add_common(app, *o);
      app.add_option("--batch", o->batch, "Concurrent sequences, comma-separated")->delimiter(',');
      app.add_option("--context", o->context, "Context lengths, comma-separated")->delimiter(',');
      app.add_option("--steps", o->steps, "Timed steps per point (default 30)");
      o->lengths.clear();
      app.add_option("--lengths", o->lengths,
                     "Also time prefill of these prompt lengths on the same loaded model")
          ->delimiter(',');
      app.add_flag("--no-graphs", o->no_graphs, "Time eager launches only (no CUDA graphs)");
      return [o]() -> int { return run_decode(*o); };
    }};

BenchRegistration prefill_reg{
    "prefill", "Prefill of one prompt on the GPU: tok/s and effective TFLOP/s vs a measured GEMM",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      add_common(app, *o);
      app.add_option("--lengths", o->lengths, "Prompt lengths, comma-separated")->delimiter(',');
      app.add_option("--attention-variants", o->attention_variants,
                     "Prefill attention kernels to time, comma-separated (default: the current "
                     "one; with --attention-only: all of them)")
          ->delimiter(',');
      app.add_flag("--attention-only", o->attention_only,
                   "Time one layer's causal attention alone per kernel (no model load; the "
                   "config's shapes), checked against the mma8w kernel");
      return [o]() -> int { return run_prefill(*o); };
    }};

BenchRegistration kernels_reg{
    "kernels", "GEMV launch shapes vs cuBLASLt on every linear shape of a config (GB/s)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--config", o->config, "A model folder, or the path of its config.json")
          ->required();
      return [o]() -> int { return run_kernels(*o); };
    }};

}  // namespace
}  // namespace syv::cli
