// Engine flags shared by commands that run the engine (serve, generate --prompts-file, bench
// offline): page size, pool size, KV dtype, batch limits, prefix caching, checkpoints, CUDA graphs.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/kv_cache_dtype.h"
#include "engine/engine.h"

namespace syv::cli {

struct EngineArgs {
  EngineOptions options;
  int64_t kv_cache_mb = 1024;
  bool no_prefix_caching = false;
  int64_t checkpoint_cache_mb = 1024;
  // Eager by default: decode attention's split layout no longer depends on the context, so a
  // graph serves every context at full speed; measured on an H200 (docs/engine.md "CUDA graphs"),
  // graph steps were never slower than eager ones: 1.00-1.06x on qwen3-8b, 1.02-1.24x on
  // qwen3-0.6b, at contexts 33..96 and 2049..2112 with batches of 1 to 64.
  std::string cuda_graphs = "eager";
  std::string state_dtype = "fp32";
  // --kv-cache-dtype (cli/kv_cache_dtype.h): resolved against the backend and the model by the
  // command (resolve_kv_cache_dtype) into options.kv_dtype, once both are known.
  std::string kv_cache_dtype = "auto";
  // Host tier in GiB (kv/host_tier.h): < 0 (the default) = a quarter of the free host memory, at
  // most 32 GiB; 0 = off.
  double host_cache_gb = -1;
  // Pinned reserve of the host tier in GiB (kv/host_tier.h "Memory"): < 0 (the default) = 4 GiB
  // or, when larger, the KV pages of one max_model_len sequence.
  double host_pin_reserve_gb = -1;
  std::string host_write_ahead = "on";      // --host-write-ahead on|off
  std::string host_pin_idle = "tier";       // --host-pin-idle tier|reserve
  std::string emit_after_launch = "auto";   // --emit-after-launch auto|on|off
  std::string admit_after_launch = "auto";  // --admit-after-launch auto|on|off
  // --draft-model DIR (--speculative-method draft): loaded by the command (load_draft_model) and
  // set as options.draft_model before the engine starts.
  std::string draft_model_dir;
  // --speculative-adaptive on|off (docs/engine.md "Adaptive speculation"): on by default here.
  std::string speculative_adaptive = "on";
  // The options with the flags applied.
  EngineOptions resolved() const {
    EngineOptions o = options;
    o.kv_cache_bytes = kv_cache_mb << 20;
    o.checkpoint_cache_bytes = checkpoint_cache_mb << 20;
    o.enable_prefix_caching = !no_prefix_caching;
    o.cuda_graphs = cuda_graphs;
    o.speculative_adaptive = speculative_adaptive == "on";
    o.state_dtype = state_dtype == "bf16" ? DType::BF16 : DType::F32;
    o.host_cache_bytes =
        host_cache_gb < 0 ? -1 : static_cast<int64_t>(host_cache_gb * static_cast<double>(1 << 30));
    o.host_write_ahead = host_write_ahead == "on";
    o.host_pin_all_while_idle = host_pin_idle == "tier";
    o.emit_after_launch = emit_after_launch == "auto" ? -1 : emit_after_launch == "on" ? 1 : 0;
    o.admit_loads_after_launch = admit_after_launch == "auto" ? -1
                                 : admit_after_launch == "on" ? 1
                                                              : 0;
    o.host_pin_reserve_bytes =
        host_pin_reserve_gb < 0
            ? -1
            : static_cast<int64_t>(host_pin_reserve_gb * static_cast<double>(1 << 30));
    return o;
  }
  // --speculative-method mtp: the model must be loaded with its MTP head (ModelArgs::mtp).
  bool wants_mtp() const { return options.speculative_method == "mtp"; }
  bool wants_draft_model() const { return options.speculative_method == "draft"; }
  // --draft-model with another --speculative-method is refused, not ignored ("" when fine).
  std::string draft_model_error() const {
    if (draft_model_dir.empty() || wants_draft_model()) return "";
    return "--draft-model needs --speculative-method draft (found \"" + options.speculative_method +
           "\")";
  }
};

inline void add_engine_args(CLI::App& app, EngineArgs& args) {
  app.add_option("--page-size", args.options.page_size, "Tokens per KV page (default 64).");
  app.add_option("--num-pages", args.options.num_pages,
                 "KV pages in the pool (default: --kv-cache-mb worth).");
  app.add_option("--kv-cache-mb", args.kv_cache_mb,
                 "KV pool size in MiB when --num-pages is 0 (default 1024; `syv serve` on a GPU "
                 "sizes the pool from --gpu-memory-utilization instead unless this is given).");
  app.add_option("--max-num-seqs", args.options.max_num_seqs,
                 "Running sequences at most (default 256).");
  app.add_option("--max-batched-tokens", args.options.max_num_batched_tokens,
                 "Token budget of one step: decode tokens + prefill chunks (default 2048; `serve` "
                 "and `bench offline` on a GPU choose it: the largest multiple of 1024 within "
                 "2048-16384 whose chunk's linears compute in 50 ms at the GPU's measured GEMM "
                 "rate, logged at start-up).");
  app.add_option("--max-prefill-chunk", args.options.max_prefill_chunk,
                 "Longest prefill chunk of one sequence per step (default 0 = the budget).");
  app.add_option("--max-model-len", args.options.max_model_len,
                 "Prompt + max tokens at most (default: the model's maximum).");
  app.add_flag("--no-prefix-caching", args.no_prefix_caching, "Do not reuse cached prompt pages.");
  // Hybrid models (Qwen3.5, Qwen3-Next): recurrent-state checkpoints (docs/hybrid-cache.md).
  app.add_option("--checkpoint-interval", args.options.checkpoint_interval,
                 "Hybrid models: tokens between state checkpoints, a multiple of --page-size "
                 "(default 0 = 4 pages).");
  app.add_option("--prefix-retention", args.options.prefix_retention,
                 "Hybrid models: checkpoints a finished request leaves behind: dense (all), "
                 "boundaries (the prompt's resend/extension boundaries) or N (those and every N "
                 "tokens; a multiple of the interval). Default dense.");
  app.add_option("--num-checkpoints", args.options.num_checkpoints,
                 "Hybrid models: checkpoint pool size (default: --checkpoint-cache-mb worth, at "
                 "most 8 per --max-num-seqs).");
  add_kv_cache_dtype_arg(app, args.kv_cache_dtype);
  app.add_option("--state-dtype", args.state_dtype,
                 "Hybrid models: dtype of the delta-rule state, fp32 (default) or bf16 (CUDA only: "
                 "half the state's memory and per-step traffic, rounded once per step).")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--checkpoint-cache-mb", args.checkpoint_cache_mb,
                 "Hybrid models: checkpoint pool budget in MiB when --num-checkpoints is 0 "
                 "(default 1024).");
  // Host tier under the device cache (docs/hybrid-cache.md "Host tier").
  app.add_option("--host-cache-gb", args.host_cache_gb,
                 "Host memory (GiB; pinned on CUDA) that prefix pages and hybrid checkpoints "
                 "evicted from the device pools are written back to and served from on a hit. "
                 "0 = off; default: a quarter of the free host memory, at most 32 GiB (logged).")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--host-write-ahead", args.host_write_ahead,
                 "Host tier: copy the device pages the next step could evict to the host between "
                 "steps, ahead of their eviction, so no step waits for a write-back: on (default) "
                 "or off (write each page back when it is evicted).")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--host-pin-reserve-gb", args.host_pin_reserve_gb,
                 "Host tier memory kept pinned ahead of evictions (GiB; default 4, or one "
                 "--max-model-len sequence's KV pages when larger; at least one 128 MiB piece). "
                 "Pinning happens only between steps, one piece per gap and while idle; an "
                 "eviction that finds the reserve empty is not written back.")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--host-pin-idle", args.host_pin_idle,
                 "Host tier: what the engine pins while it is idle: tier (default: all of it, a "
                 "128 MiB piece per idle loop turn, so busy steps later pin nothing) or reserve "
                 "(only --host-pin-reserve-gb; the rest is pinned in busy gaps as evictions need "
                 "it, each 128 MiB piece stalling its gap ~3.5 ms on an H200 machine).")
      ->check(CLI::IsMember({"tier", "reserve"}));
  app.add_option("--emit-after-launch", args.emit_after_launch,
                 "Emit a token that does not end its request (detokenize it, queue its event) "
                 "after the next step's forward is launched, overlapping the GPU's work instead "
                 "of adding to the gap between steps: auto (default: on with CUDA, off on the "
                 "CPU, where it would only delay events), on or off (docs/engine.md \"Emit after "
                 "the next launch\").")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--admit-after-launch", args.admit_after_launch,
                 "Host tier: admit a request whose cached prefix is copied back from the host "
                 "tier after the step's forward is launched, so its admission (pages, "
                 "evictions, the copy calls) overlaps the GPU's work instead of delaying "
                 "the other sequences' step; requests waiting behind it are admitted a step "
                 "later: auto (default: on with CUDA, off on the CPU, where nothing overlaps), on "
                 "or off (docs/engine.md \"Admission after the launch\").")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  // CUDA graphs for decode steps, one per batch-size bucket (docs/engine.md "CUDA graphs").
  app.add_option("--cuda-graphs", args.cuda_graphs,
                 "CUDA graphs for decode steps: eager (the default: capture every bucket at "
                 "start-up), lazy (each bucket on first use) or off (see docs/engine.md \"CUDA "
                 "graphs\"). With speculation, verify steps whose sequences carry the same "
                 "number of drafts and the MTP head's forwards replay graphs too (eager captures "
                 "the verify graphs of up to 16 sequences at start-up, the rest on first use). "
                 "Ignored on the CPU backend.")
      ->check(CLI::IsMember({"eager", "lazy", "off"}));
  // Speculative decoding (docs/engine.md "Verify steps").
  CLI::Option* method =
      app.add_option("--speculative-method", args.options.speculative_method,
                     "Draft tokens to verify in each decode step: ngram (prompt lookup: the tokens "
                     "that followed the last n-gram's previous occurrence), mtp (the "
                     "checkpoint's MTP head, Qwen3.5 / Qwen3-Next with mtp.* tensors: greedy "
                     "drafts, its K/V in the same pages) or draft (a smaller model sharing the "
                     "tokenizer, --draft-model: greedy drafts, its own KV pool). Output is "
                     "unchanged; needs --num-speculative-tokens.")
          ->check(CLI::IsMember({"ngram", "mtp", "draft"}));
  app.add_option("--draft-model", args.draft_model_dir,
                 "draft: the draft model's folder (a dense Qwen3 with the target's vocabulary, "
                 "e.g. Qwen3-0.6B for Qwen3-8B); it runs on the same device and gets a KV pool of "
                 "as many pages as the target's.")
      ->needs(method);
  app.add_option("--num-speculative-tokens", args.options.num_speculative_tokens,
                 "Drafts per sequence and step, 1..16 (with --speculative-method).")
      ->check(CLI::Range(0, kMaxSpeculativeTokens));
  app.add_option("--speculative-adaptive", args.speculative_adaptive,
                 "on (the default): each sequence asks for the drafts that pay at this step, "
                 "from its recent acceptance and the batch size (a cost model, docs/engine.md "
                 "\"Adaptive speculation\"), none when they would not; off: always "
                 "--num-speculative-tokens.")
      ->check(CLI::IsMember({"on", "off"}))
      ->needs(method);
  app.add_option("--speculative-disable-by-batch-size",
                 args.options.speculative_disable_by_batch_size,
                 "No drafts at all in a step with this many decoding sequences or more, adaptive "
                 "or not (default 0 = never: the cost model decides).")
      ->check(CLI::NonNegativeNumber)
      ->needs(method);
  app.add_option("--speculative-cost-knee", args.options.speculative_cost_knee,
                 "Cost model: the decode batch at which a step's per-token work equals its fixed "
                 "cost (default: measured per backend, docs/performance.md).")
      ->check(CLI::NonNegativeNumber)
      ->needs(method);
  app.add_option("--speculative-draft-cost", args.options.speculative_draft_cost,
                 "Cost model: the drafter's cost per draft, in decode steps (default: measured "
                 "per method; ngram 0).")
      ->check(CLI::NonNegativeNumber)
      ->needs(method);
  app.add_option("--ngram-min", args.options.ngram_min,
                 "ngram: shortest n-gram looked up (default 2).")
      ->needs(method);
  app.add_option("--ngram-max", args.options.ngram_max,
                 "ngram: longest n-gram looked up, tried first (default 4).")
      ->needs(method);
  app.add_option("--max-graph-batch", args.options.max_graph_batch,
                 "Largest decode batch run as a CUDA graph; larger steps run eagerly (default 0 "
                 "= 256, capped at --max-num-seqs and --max-batched-tokens).");
}

}  // namespace syv::cli
