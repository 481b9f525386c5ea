// `syv bench serve`: one set of streamed requests sent with some in flight at once, what it
// measured (TTFT, inter-token latency, end-to-end latency, tokens, errors by kind) and how it is
// printed: a table row and a JSON object with percentiles in milliseconds.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/openai_client.h"

namespace syv::cli {

struct Percentiles {
  int64_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;  // in the samples' unit; all 0 when n == 0
};
// Linear interpolation between the closest ranks (numpy's default).
Percentiles percentiles(std::vector<double> samples);

struct RunStats {
  std::string label;  // "burst", "c1", "sweep c=4" ...
  int concurrency = 1;
  int64_t requests = 0;   // sent
  int64_t completed = 0;  // answered 200 with a well-formed stream
  double wall_s = 0;      // first send to last answer
  int64_t prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
  std::vector<double> ttft_s, itl_s, e2e_s;        // one per completed request; ITL: every gap
  std::map<std::string, int64_t> errors;           // "http_429", "transport: Connection" ...
  std::map<std::string, std::string> first_error;  // per kind: the first reply's body or message

  // Counts one reply: a completed request's times and tokens, or its error kind.
  void add(const StreamReply& reply);
  double output_tokens_per_s() const { return wall_s > 0 ? output_tokens / wall_s : 0; }
  double requests_per_s() const { return wall_s > 0 ? completed / wall_s : 0; }
  nlohmann::json to_json() const;  // times in ms: {"ttft_ms": {"p50", "p90", "p99", "mean"}, ...}
};

// POSTs every body of `bodies` to `path` as a stream, `concurrency` of them in flight (a new one
// as soon as one ends), and measures them; progress on stderr about once a second.
RunStats run_streams(const OpenAiClient& client, const std::string& label,
                     const std::vector<nlohmann::json>& bodies, int concurrency,
                     const std::string& path);

// The table: a header line and one row per run.
std::string stats_table_header();
std::string stats_table_row(const RunStats& s);

}  // namespace syv::cli
