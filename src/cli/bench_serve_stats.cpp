#include "cli/bench_serve_stats.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

namespace syv::cli {

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = static_cast<int64_t>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  auto at = [&](double q) {
    const double rank = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(rank);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  return p;
}

void RunStats::add(const StreamReply& r) {
  ++requests;
  std::string kind;
  if (r.status == 0) {
    kind = "transport: " + r.error;
  } else if (r.status != 200) {
    kind = "http_" + std::to_string(r.status);
  } else if (!r.format_ok) {
    kind = "bad_stream";
  } else if (!r.done) {
    kind = "no_done";
  } else if (r.output_times.empty()) {
    kind = "no_output";
  }
  if (!kind.empty()) {
    if (++errors[kind] == 1) first_error[kind] = r.format_ok ? r.error : r.format_error;
    return;
  }
  ++completed;
  ttft_s.push_back(r.ttft);
  e2e_s.push_back(r.e2e);
  for (size_t i = 1; i < r.output_times.size(); ++i)
    itl_s.push_back(r.output_times[i] - r.output_times[i - 1]);
  output_tokens += r.completion_tokens();
  cached_tokens += r.cached_tokens();
  if (r.usage.is_object() && r.usage.contains("prompt_tokens") &&
      r.usage["prompt_tokens"].is_number_integer())
    prompt_tokens += r.usage["prompt_tokens"].get<int64_t>();
}

namespace {

nlohmann::json ms(const std::vector<double>& seconds) {
  std::vector<double> v;
  v.reserve(seconds.size());
  for (double s : seconds) v.push_back(s * 1e3);
  const Percentiles p = percentiles(std::move(v));
  return {{"n", p.n}, {"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}

}  // namespace

nlohmann::json RunStats::to_json() const {
  return {{"label", label},
          {"concurrency", concurrency},
          {"requests", requests},
          {"completed", completed},
          {"wall_s", wall_s},
          {"prompt_tokens", prompt_tokens},
          {"output_tokens", output_tokens},
          {"cached_tokens", cached_tokens},
          {"output_tok_s", output_tokens_per_s()},
          {"req_s", requests_per_s()},
          {"ttft_ms", ms(ttft_s)},
          {"itl_ms", ms(itl_s)},
          {"e2e_ms", ms(e2e_s)},
          {"errors", errors}};
}

RunStats run_streams(const OpenAiClient& client, const std::string& label,
                     const std::vector<nlohmann::json>& bodies, int concurrency,
                     const std::string& path) {
  RunStats stats;
  stats.label = label;
  stats.concurrency = concurrency;
  std::mutex mu;
  std::atomic<size_t> next{0};
  const size_t n = bodies.size();
  const auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      const StreamReply reply = client.stream(path, bodies[i]);
      std::lock_guard<std::mutex> lock(mu);
      stats.add(reply);
      const auto now = std::chrono::steady_clock::now();
      if (stats.requests == static_cast<int64_t>(n) ||
          now - last_report > std::chrono::seconds(1)) {
        last_report = now;
        int64_t errors = 0;
        for (const auto& [kind, k] : stats.errors) errors += k;
        std::fprintf(stderr, "bench serve: %s: %lld/%zu done, %lld error(s)\n", label.c_str(),
                     static_cast<long long>(stats.requests), n, static_cast<long long>(errors));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::min<int>(concurrency, static_cast<int>(n)); ++t)
    threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  stats.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

std::string stats_table_header() {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %5s %6s %8s %9s %7s %23s %23s %23s %s", "run", "conc",
                "done", "wall_s", "out_tok/s", "req/s", "ttft_ms p50/p90/p99", "itl_ms p50/p90/p99",
                "e2e_ms p50/p90/p99", "errors");
  return buf;
}

std::string stats_table_row(const RunStats& s) {
  auto triple = [](const std::vector<double>& seconds) {
    std::vector<double> v;
    for (double x : seconds) v.push_back(x * 1e3);
    const Percentiles p = percentiles(std::move(v));
    char b[64];
    std::snprintf(b, sizeof b, "%.1f/%.1f/%.1f", p.p50, p.p90, p.p99);
    return std::string(b);
  };
  std::string errors;
  for (const auto& [kind, n] : s.errors)
    errors += (errors.empty() ? "" : ", ") + kind + " x" + std::to_string(n);
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-12s %5d %6lld %8.2f %9.1f %7.2f %23s %23s %23s %s",
                s.label.c_str(), s.concurrency, static_cast<long long>(s.completed), s.wall_s,
                s.output_tokens_per_s(), s.requests_per_s(), triple(s.ttft_s).c_str(),
                triple(s.itl_s).c_str(), triple(s.e2e_s).c_str(),
                errors.empty() ? "none" : errors.c_str());
  return buf;
}

}  // namespace syv::cli
