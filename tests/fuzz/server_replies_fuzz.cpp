// libFuzzer target: what `syv bench serve` and `syv verify` read from a server they do not trust
// (cli/sse_reader.h, cli/prometheus_text.h). The input's first byte picks the piece size the
// stream arrives in; the rest is fed to SseReader as a streamed completion's body and read as a
// /metrics text. Nothing may crash, and the reply must stay self-consistent: a format error
// iff one is named, output times in order from the first, the text only from output chunks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/prometheus_text.h"
#include "cli/sse_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  syv::cli::StreamReply reply;
  syv::cli::SseReader reader(&reply);
  double t = 0;
  size_t outputs = 0;
  for (size_t at = 0; at < body.size(); at += piece) {
    outputs = reader.feed(body.substr(at, piece), t);
    t += 1;
  }
  reader.finish();
  if (outputs != reply.output_times.size() && !body.empty()) std::abort();
  if (reply.format_ok != reply.format_error.empty()) std::abort();
  for (size_t i = 1; i < reply.output_times.size(); ++i)
    if (reply.output_times[i] < reply.output_times[i - 1]) std::abort();
  if (reply.output_times.empty() ? reply.ttft != -1 : reply.ttft != reply.output_times[0])
    std::abort();
  if (!reply.text.empty() && reply.output_times.empty()) std::abort();
  (void)reply.completion_tokens();
  (void)reply.cached_tokens();

  const std::string text(body);
  for (const char* name : {"syv_kv_pool_tokens", "syv_device_info", "a", ""}) {
    const auto samples = syv::cli::prometheus_samples(text, name);
    const double sum = syv::cli::prometheus_sum(text, name);
    if (samples.empty() && sum != -1) std::abort();
    (void)syv::cli::prometheus_by_label(text, name, "device");
  }
  return 0;
}
