// A server-wide bound on the memory of request bodies being parsed at once (--max-parse-memory-mb).
//
// --max-json-values and --max-body-bytes bound one request's parse (~0.5 KB a JSON value: the
// parse tree, the ordered copy, the Jinja values; json_limits.h), ~130 MB at their defaults, but
// not how many run at once: 16 such requests on 16 workers would take 2 GB. So each request
// estimates its parse before building anything (body bytes + kParseBytesPerValue x its values,
// counted by the pre-pass; then its tool-call `arguments` strings, before they are parsed) and
// holds that many bytes of the budget until its parse trees are freed (before generation). A
// request that does not fit next to the others is refused at once with 503 `server_busy` and
// Retry-After (the openai clients retry it); one whose estimate alone is larger than the whole
// budget can never fit and gets 413 `parse_budget_exceeded`.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace syv::server {

// Bytes a request's parse is estimated to take per JSON value: the measured peak of a body of
// 262,100 `{}` through the chat route was +125 MB, 477 bytes a value (docs/server.md "Limits").
constexpr size_t kParseBytesPerValue = 512;

// The default of --max-parse-memory-mb: 7 parses at the default limits at once (each at most an
// 8 MiB body + 2^18 values x 512 bytes = 136 MiB), or thousands of ordinary requests (a few KB).
constexpr size_t kDefaultMaxParseMemoryMb = 1024;

class ParseBudget {
 public:
  explicit ParseBudget(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  ParseBudget(const ParseBudget&) = delete;
  ParseBudget& operator=(const ParseBudget&) = delete;

  // Bytes of the budget that one request holds; returned when it is destroyed (every path:
  // success, error, exception, disconnect). Move-only.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) {
      other.budget_ = nullptr;
      other.bytes_ = 0;
    }
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { release(); }

    enum class Grow { kOk, kBusy, kTooLarge };
    // Adds `bytes` to what this request holds if the budget has room for them next to every
    // other request's: kOk. kBusy: not now (nothing changes; the request should be refused with
    // 503). kTooLarge: this request's total would pass the whole budget even alone (413).
    Grow grow(size_t bytes);
    size_t bytes() const { return bytes_; }
    // Returns what it holds to the budget now.
    void release();

   private:
    friend class ParseBudget;
    explicit Hold(ParseBudget* budget) : budget_(budget) {}
    ParseBudget* budget_ = nullptr;
    size_t bytes_ = 0;
  };

  // An empty hold on this budget (grow() it).
  Hold hold() { return Hold(this); }
  size_t capacity() const { return capacity_; }
  size_t in_use() const { return in_use_.load(); }

 private:
  const size_t capacity_;
  std::atomic<size_t> in_use_{0};
};

}  // namespace syv::server
