// What `syv bench serve` and `syv verify` read from a server (cli/sse_reader.h,
// cli/prometheus_text.h; fuzzed by tests/fuzz/server_replies_fuzz.cpp): a streamed completion read
// the same however its bytes are split, each format error named once (a non-SSE line, a non-JSON
// payload, data after [DONE], a stream ending inside a line), usage and cached tokens taken from
// the last usage object; /metrics samples with escaped labels, a name another merely starts with
// skipped, and a sum of negative values that stays a sum.
#include <gtest/gtest.h>

#include <string>

#include "cli/prometheus_text.h"
#include "cli/sse_reader.h"

namespace syv::cli {
namespace {

const std::string kStream =
    "data: {\"choices\":[{\"index\":0,\"text\":\"Hel\",\"finish_reason\":null}]}\n\n"
    ": keep-alive\r\n"
    "data:{\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\r\n\n"
    "data: {\"choices\":[],\"usage\":{\"completion_tokens\":7,"
    "\"prompt_tokens_details\":{\"cached_tokens\":16}}}\n\n"
    "data: [DONE]\n\n";

StreamReply read(const std::string& body, size_t piece) {
  StreamReply r;
  SseReader reader(&r);
  double t = 0;
  for (size_t at = 0; at < body.size(); at += piece) reader.feed(body.substr(at, piece), t++);
  reader.finish();
  return r;
}

TEST(SseReader, ReadsTheSameHoweverTheBytesAreSplit) {
  const StreamReply whole = read(kStream, kStream.size());
  EXPECT_TRUE(whole.format_ok) << whole.format_error;
  EXPECT_TRUE(whole.done);
  EXPECT_EQ(whole.text, "Hello");  // reasoning counts as output, not as text
  EXPECT_EQ(whole.output_times.size(), 3u);
  EXPECT_EQ(whole.finish_reason, "stop");
  EXPECT_EQ(whole.completion_tokens(), 7);
  EXPECT_EQ(whole.cached_tokens(), 16);
  for (size_t piece : {1, 2, 3, 7, 64}) {
    const StreamReply r = read(kStream, piece);
    EXPECT_TRUE(r.format_ok) << piece << ": " << r.format_error;
    EXPECT_EQ(r.text, whole.text) << piece;
    EXPECT_EQ(r.output_times.size(), whole.output_times.size()) << piece;
    EXPECT_EQ(r.ttft, r.output_times.front()) << piece;
    EXPECT_EQ(r.usage, whole.usage) << piece;
  }
}

TEST(SseReader, NamesTheFirstFormatError) {
  auto error = [](const std::string& body) {
    const StreamReply r = read(body, body.size());
    EXPECT_FALSE(r.format_ok) << body;
    return r.format_error;
  };
  EXPECT_EQ(error("event: x\ndata: [DONE]\n"), "not an SSE line: event: x");
  EXPECT_EQ(error("data: {\"choices\"\ndata: nope\n"), "not JSON: {\"choices\"");
  EXPECT_EQ(error("data: [DONE]\ndata: {}\n"), "data after [DONE]");
  EXPECT_EQ(error("data: {}\ndata: [DO"), "the stream ended inside a line: data: [DO");
  // Shapes that are JSON but not a completion chunk carry no output and are no error.
  const StreamReply odd = read("data: 5\ndata: {\"choices\":[7]}\ndata: {\"choices\":{}}\n", 99);
  EXPECT_TRUE(odd.format_ok) << odd.format_error;
  EXPECT_TRUE(odd.output_times.empty());
  EXPECT_EQ(odd.completion_tokens(), 0);
}

TEST(PrometheusText, ReadsSamplesLabelsAndSums) {
  const std::string text =
      "# TYPE syv_x gauge\n"
      "syv_x{device=\"cuda:1\"} -3.5\n"
      "syv_x{device=\"cuda:0\",name=\"a \\\"b\\\"\\n\"} 2\n"
      "syv_x_total 9\n"
      "syv_x{broken 4\n";
  const auto samples = prometheus_samples(text, "syv_x");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].labels.at("name"), "a \"b\"\n");
  EXPECT_EQ(prometheus_sum(text, "syv_x"), -1.5);
  EXPECT_EQ(prometheus_sum(text, "syv_x_total"), 9);
  EXPECT_EQ(prometheus_sum(text, "syv_y"), -1);  // none
  const auto by = prometheus_by_label(text, "syv_x", "device");
  EXPECT_EQ(by.at("cuda:1"), -3.5);
}

}  // namespace
}  // namespace syv::cli
