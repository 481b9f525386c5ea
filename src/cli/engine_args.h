// Engine flags shared by commands that run the engine (generate --prompts-file, bench offline;
// serve may adopt them): page size, pool size, batch limits, prefix caching.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/engine.h"

namespace syv::cli {

struct EngineArgs {
  EngineOptions options;
  int64_t kv_cache_mb = 1024;
  bool no_prefix_caching = false;
  // The options with the flags applied.
  EngineOptions resolved() const {
    EngineOptions o = options;
    o.kv_cache_bytes = kv_cache_mb << 20;
    o.enable_prefix_caching = !no_prefix_caching;
    return o;
  }
};

inline void add_engine_args(CLI::App& app, EngineArgs& args) {
  app.add_option("--page-size", args.options.page_size, "Tokens per KV page (default 64).");
  app.add_option("--num-pages", args.options.num_pages,
                 "KV pages in the pool (default: --kv-cache-mb worth).");
  app.add_option("--kv-cache-mb", args.kv_cache_mb,
                 "KV pool size in MiB when --num-pages is 0 (default 1024).");
  app.add_option("--max-num-seqs", args.options.max_num_seqs,
                 "Running sequences at most (default 256).");
  app.add_option("--max-batched-tokens", args.options.max_num_batched_tokens,
                 "Token budget of one step: decode tokens + prefill chunks (default 2048).");
  app.add_option("--max-prefill-chunk", args.options.max_prefill_chunk,
                 "Longest prefill chunk of one sequence per step (default 0 = the budget).");
  app.add_option("--max-model-len", args.options.max_model_len,
                 "Prompt + max tokens at most (default: the model's maximum).");
  app.add_flag("--no-prefix-caching", args.no_prefix_caching, "Do not reuse cached prompt pages.");
}

}  // namespace syv::cli
