// Bulk uploads into backend memory (model loading): the host side of each write is produced in
// chunks by the global thread pool into staging memory while earlier chunks are being copied.
//
//   auto up = make_bulk_uploader(backend);
//   up->write(dst, bytes, [&](size_t offset, size_t n, void* host) { /* bytes [offset, +n) */ });
//   up->finish();  // every write has landed in backend memory
//
// CUDA: a few MB-sized pinned staging buffers, used in turn (the host fills one while the copy
// engine drains the others), async host-to-device copies on the uploader's own stream. Any other
// backend: one host staging buffer and Backend::upload().
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace syv {

class Backend;

class BulkUploader {
 public:
  // Fills `host` with bytes [offset, offset + n) of what is written. Called concurrently from
  // several threads on disjoint ranges; offset and n are multiples of 64 bytes, except that the
  // last range ends at the write's end.
  using Produce = std::function<void(size_t offset, size_t n, void* host)>;

  virtual ~BulkUploader() = default;
  // Writes `bytes` bytes to backend memory at `dst`. Returns once every produce() call is done
  // (the sources may go away), possibly before the copy has landed: see finish().
  virtual void write(void* dst, size_t bytes, const Produce& produce) = 0;
  // Blocks until every write so far is in backend memory.
  virtual void finish() = 0;
};

// For implementations: calls produce() for bytes [offset, offset + n) of a write, split into
// 64-byte-aligned ranges over the global thread pool, each filling its part of `host`.
void produce_in_parallel(const BulkUploader::Produce& produce, size_t offset, size_t n, void* host);

// The fastest uploader `backend` offers (pinned staging + async copies on CUDA). It must outlive
// no backend it writes to; destroying it waits for its writes.
std::unique_ptr<BulkUploader> make_bulk_uploader(Backend& backend);

}  // namespace syv
