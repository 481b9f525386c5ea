// The host tier's copies on CUDA (backend/cuda/host_copy.h): copy_batch_async of many scattered
// segments between device memory and pinned host memory (from allocate_pinned() and from
// pin_host_pages()), and of strided ops (a cache page: rows at a pitch), goes as one batch (one
// cudaMemcpy3DBatchAsync, or one gather kernel: both paths run) or as a cudaMemcpyAsync /
// cudaMemcpy2DAsync per op, on the copy stream of its direction (loads and write-backs on two
// streams that do not wait for each other); every byte lands both ways, the bytes around the
// segments stay untouched, the batch is ordered after the compute stream's earlier work and before
// work after order_after_copy(), and batches neither path takes (misaligned, or to pageable memory)
// fall back to cudaMemcpyAsync exactly; deferred copies (Backend::defer_copies()) are issued in
// call order when flushed or waited for. The *Timing test prints the copy rates
// (cudaMemcpy3DBatchAsync, gather kernel, one cudaMemcpyAsync per row, one large copy); the
// regression run excludes it. Skipped cleanly when no CUDA device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/host_copy.h"
#include "backend/host_pages.h"

namespace syv::testing {
namespace {

constexpr size_t kRegion = size_t{8} << 20;  // bytes of each side's region

// Non-overlapping segments of `region` bytes on each side, sizes multiples of `align` (16: what
// the kernel takes) from 16 B to 256 KiB, in shuffled order at shuffled places.
std::vector<CopyOp> scattered(char* dst, char* src, size_t align, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::pair<size_t, size_t>> slots;  // (offset, bytes) carved from the region
  for (size_t at = align; at < kRegion;) {
    size_t bytes = (size_t{1} << (4 + rng() % 15)) + align * (rng() % 3);
    bytes = bytes / align * align;
    if (at + bytes + 64 > kRegion) break;
    slots.push_back({at, bytes});
    at += bytes + 16 * (1 + rng() % 4);  // a gap left untouched
  }
  // Segment i reads slot i on the source side and writes a slot of the same size, shuffled among
  // those (a permutation: no two segments write the same bytes).
  std::map<size_t, std::vector<size_t>> by_size;
  for (size_t i = 0; i < slots.size(); ++i) by_size[slots[i].second].push_back(i);
  std::vector<size_t> to(slots.size());
  for (auto& [bytes, ids] : by_size) {
    std::vector<size_t> dest = ids;
    std::shuffle(dest.begin(), dest.end(), rng);
    for (size_t k = 0; k < ids.size(); ++k) to[ids[k]] = dest[k];
  }
  std::vector<CopyOp> ops;
  for (size_t i = 0; i < slots.size(); ++i)
    ops.push_back({dst + slots[to[i]].first, src + slots[i].first, slots[i].second});
  std::shuffle(ops.begin(), ops.end(), rng);
  return ops;
}

void fill(std::vector<unsigned char>& v, uint32_t seed) {
  std::mt19937 rng(seed);
  for (unsigned char& c : v) c = static_cast<unsigned char>(rng());
}

// What `ops` (from base `src_base` to `dst_base`) leave in a destination that held `before`.
std::vector<unsigned char> expected(const std::vector<CopyOp>& ops, const char* dst_base,
                                    const char* src_base, const std::vector<unsigned char>& src,
                                    std::vector<unsigned char> before) {
  for (const CopyOp& op : ops) {
    const size_t d = static_cast<size_t>(static_cast<const char*>(op.dst) - dst_base);
    const size_t s = static_cast<size_t>(static_cast<const char*>(op.src) - src_base);
    std::memcpy(before.data() + d, src.data() + s, op.bytes);
  }
  return before;
}

void expect_same(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": first differing byte " << first;
}

// Scattered segments host -> device and device -> host through copy_batch_async, with `host`
// being pinned memory of the backend; ordering against the compute stream checked on the way.
// batched: whether both batches must go as one batch each (the backend's batch_copy_path(): one
// cudaMemcpy3DBatchAsync or one gather kernel; else as cudaMemcpyAsync calls).
void round_trip(CudaBackend& gpu, char* host, size_t align, uint32_t seed, bool batched) {
  const uint64_t batches = gpu.batched_copies(), gathered = gpu.gather_batches();
  DeviceBuffer dev = gpu.allocate(kRegion), dev2 = gpu.allocate(kRegion);
  char* d = static_cast<char*>(dev.data());
  std::vector<unsigned char> host_bytes(kRegion), dev_bytes(kRegion), got(kRegion);
  fill(host_bytes, seed);
  fill(dev_bytes, seed + 1);
  std::memcpy(host, host_bytes.data(), kRegion);
  // Host -> device: the upload is on the compute stream; the batch must start after it.
  gpu.upload(d, dev_bytes.data(), kRegion);
  const std::vector<CopyOp> in = scattered(d, host, align, seed + 2);
  ASSERT_GT(in.size(), 20u);
  CopyEvent landed = gpu.copy_batch_async(in, CopyDir::kIn);
  gpu.order_after_copy(landed);
  gpu.copy(dev2.data(), d, kRegion);  // compute stream, after the batch landed
  gpu.download(got.data(), dev2.data(), kRegion);
  const std::vector<unsigned char> want_dev = expected(in, d, host, host_bytes, dev_bytes);
  expect_same(got, want_dev, "host -> device");
  // Device -> host: the device now holds want_dev; the host keeps host_bytes around the segments.
  gpu.fill_zero(dev2.data(), kRegion);  // compute stream work the batch must follow
  gpu.copy(dev2.data(), d, kRegion);
  const std::vector<CopyOp> out = scattered(host, static_cast<char*>(dev2.data()), align, seed + 3);
  gpu.wait_copy(gpu.copy_batch_async(out, CopyDir::kOut));
  std::memcpy(got.data(), host, kRegion);
  expect_same(got, expected(out, host, static_cast<char*>(dev2.data()), want_dev, host_bytes),
              "device -> host");
  EXPECT_EQ(gpu.batched_copies() - batches, batched ? 2u : 0u);
  using Path = CudaBackend::BatchCopyPath;
  const uint64_t kernels = (gpu.batch_copy_path(CopyDir::kIn) == Path::kGatherKernel) +
                           (gpu.batch_copy_path(CopyDir::kOut) == Path::kGatherKernel);
  EXPECT_EQ(gpu.gather_batches() - gathered, batched ? kernels : 0u);
}

// Strided ops (a cache store page: rows at a device pitch, back to back on the host) host ->
// device -> host through copy_batch_async: every row lands where its op says, the gaps between
// device rows untouched.
void strided_round_trip(CudaBackend& gpu, char* host, uint32_t seed) {
  constexpr size_t kRows = 12, kWidth = 4096, kPages = 9, kPitch = kPages * kWidth + 512;
  constexpr size_t kDev = kRows * kPitch, kHost = kPages * kRows * kWidth;
  static_assert(2 * kHost <= kRegion);
  DeviceBuffer dev = gpu.allocate(kDev);
  std::vector<unsigned char> src(kHost), before(kDev), got(kDev), back(kHost);
  fill(src, seed);
  fill(before, seed + 1);
  std::memcpy(host, src.data(), kHost);
  gpu.upload(dev.data(), before.data(), kDev);
  // Pages 0, 2, 4, ... of the device rows, from host pages in order.
  std::vector<CopyOp> in, out;
  std::vector<unsigned char> want = before;
  char* d = static_cast<char*>(dev.data());
  for (size_t i = 0, p = 0; p < kPages; ++i, p += 2) {
    in.push_back({d + p * kWidth, host + i * kRows * kWidth, kWidth, kRows, kPitch, kWidth});
    out.push_back(
        {host + kHost + i * kRows * kWidth, d + p * kWidth, kWidth, kRows, kWidth, kPitch});
    for (size_t r = 0; r < kRows; ++r)
      std::memcpy(want.data() + r * kPitch + p * kWidth, src.data() + (i * kRows + r) * kWidth,
                  kWidth);
  }
  gpu.order_after_copy(gpu.copy_batch_async(in, CopyDir::kIn));
  gpu.download(got.data(), dev.data(), kDev);
  expect_same(got, want, "strided host -> device");
  gpu.wait_copy(gpu.copy_batch_async(out, CopyDir::kOut));
  std::memcpy(back.data(), host + kHost, in.size() * kRows * kWidth);
  back.resize(in.size() * kRows * kWidth);
  src.resize(back.size());
  expect_same(back, src, "strided device -> host");
}

TEST(HostCopyGpu, ScatteredSegmentsBothWaysAreExact) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  auto alloc = gpu->allocate_pinned(kRegion);  // cudaHostAlloc
  ASSERT_TRUE(alloc.ok()) << alloc.message();
  auto pages = fault_in_host_pages(kRegion);
  ASSERT_TRUE(pages.ok()) << pages.message();
  auto registered = gpu->pin_host_pages(std::move(*pages));  // cudaHostRegister
  ASSERT_TRUE(registered.ok()) << registered.message();
  using Path = CudaBackend::BatchCopyPath;
  for (Path path : {Path::kCopyEngines, Path::kGatherKernel}) {
    gpu->set_batch_copy_path(CopyDir::kIn, path);
    gpu->set_batch_copy_path(CopyDir::kOut, path);
    for (uint32_t seed : {1u, 2u}) {
      SCOPED_TRACE("seed " + std::to_string(seed) +
                   (path == Path::kGatherKernel ? ", gather kernel" : ", copy engines"));
      round_trip(*gpu, static_cast<char*>(alloc->data()), 16, seed, true);
      // Registered memory is batched where the device addresses it at its host pointer
      // (cudaDevAttrCanUseHostPointerForRegisteredMem; H100 / H200 on x86 do).
      int mapped = 0;
      ASSERT_EQ(cudaDeviceGetAttribute(&mapped, cudaDevAttrCanUseHostPointerForRegisteredMem,
                                       gpu->device()),
                cudaSuccess);
      round_trip(*gpu, static_cast<char*>(registered->data()), 16, seed + 10, mapped == 1);
      // Segments the kernel does not take (8-byte sizes and places): cudaMemcpyAsync, as exact.
      round_trip(*gpu, static_cast<char*>(registered->data()), 8, seed + 20, false);
      const uint64_t batches = gpu->batched_copies();
      strided_round_trip(*gpu, static_cast<char*>(alloc->data()), seed + 30);
      EXPECT_EQ(gpu->batched_copies() - batches, 2u) << "strided batches went batched";
      // Pageable host memory: cudaMemcpy2DAsync per op, as exact.
      std::vector<char> pageable(kRegion);
      strided_round_trip(*gpu, pageable.data(), seed + 40);
    }
    // The copy engines' call exists on this machine (a fallback would have switched the path).
    EXPECT_EQ(gpu->batch_copy_path(CopyDir::kIn), path);
    EXPECT_EQ(gpu->batch_copy_path(CopyDir::kOut), path);
  }
  // Pageable host memory: cudaMemcpyAsync (the kernel cannot address it).
  std::vector<char> pageable(kRegion);
  round_trip(*gpu, pageable.data(), 16, 30, false);
}

// The two copy streams (backend.h CopyDir): a small write-back (kOut) enqueued behind a large load
// (kIn) in flight lands while the load is still running (on one in-order stream it waited for the
// load); a load of host bytes that a write-back in flight writes, enqueued after
// order_after_copy(write-back), reads what the write-back wrote (ordered through the compute
// stream, without the host waiting), and so does one enqueued after
// order_copies_after_copy(write-back, kIn) (the load stream waiting for it directly).
TEST(HostCopyGpu, WriteBacksDoNotQueueBehindLoadsAndOrderThroughTheComputeStream) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  const size_t big = size_t{1} << 30;  // ~20 ms at ~50 GB/s
  auto host = gpu->allocate_pinned(big);
  ASSERT_TRUE(host.ok()) << host.message();
  DeviceBuffer dev = gpu->allocate(big), small = gpu->allocate(kRegion);
  char* h = static_cast<char*>(host->data());
  std::vector<unsigned char> bytes(kRegion);
  fill(bytes, 41);
  gpu->upload(small.data(), bytes.data(), kRegion);
  gpu->synchronize();
  // Independent: the write-back lands, the load (18x its bytes and enqueued first) has not.
  auto out = gpu->allocate_pinned(kRegion);
  ASSERT_TRUE(out.ok()) << out.message();
  int overtaken = 0;
  for (int rep = 0; rep < 3; ++rep) {
    CopyEvent load = gpu->copy_async(dev.data(), h, big, CopyDir::kIn);
    CopyEvent wb = gpu->copy_async(out->data(), small.data(), kRegion, CopyDir::kOut);
    gpu->wait_copy(wb);
    overtaken += !gpu->copy_done(load);
    gpu->wait_copy(load);
  }
  // A load whose 1 GiB still runs after an 8 MiB write-back enqueued behind it landed, in each of
  // 3 tries, is the two streams at work.
  EXPECT_EQ(overtaken, 3) << "the write-back waited for the load in flight";
  EXPECT_EQ(std::memcmp(out->data(), bytes.data(), kRegion), 0);
  // Ordered: device `dev` (kRegion of fresh bytes) -> host h (write-back), compute stream ordered
  // after it, then host h -> device small (load), compute ordered after that, read back.
  fill(bytes, 42);
  gpu->upload(dev.data(), bytes.data(), kRegion);
  std::memset(h, 0, kRegion);
  const CopyEvent wb = gpu->copy_async(h, dev.data(), kRegion, CopyDir::kOut);
  gpu->order_after_copy(wb);
  gpu->order_after_copy(gpu->copy_async(small.data(), h, kRegion, CopyDir::kIn));
  std::vector<unsigned char> got(kRegion);
  gpu->download(got.data(), small.data(), kRegion);
  expect_same(got, bytes, "host bytes loaded after the write-back that wrote them");
  // Ordered stream to stream (order_copies_after_copy), the compute stream not waiting for the
  // write-back: device `dev` -> host h, then the load stream waits for it, host h -> device
  // small; the compute stream waits for the load only.
  fill(bytes, 43);
  gpu->upload(dev.data(), bytes.data(), kRegion);
  std::memset(h, 0, kRegion);
  const CopyEvent wb2 = gpu->copy_async(h, dev.data(), kRegion, CopyDir::kOut);
  gpu->order_copies_after_copy(wb2, CopyDir::kIn);
  gpu->order_after_copy(gpu->copy_async(small.data(), h, kRegion, CopyDir::kIn));
  gpu->download(got.data(), small.data(), kRegion);
  expect_same(got, bytes, "host bytes loaded after the write-back, ordered stream to stream");
}

// Deferred issue (Backend::defer_copies()): with it off, defer_copies() defers nothing; with it
// on, copies and stream-to-stream waits are kept until flush_copies() or until something waits
// for or asks about one (copy_done, wait_copy, order_after_copy), then issued in call order, each
// still after the compute stream's work before its call.
TEST(HostCopyGpu, DeferredCopiesIssueInCallOrderWhenFlushedOrWaitedFor) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  auto host = gpu->allocate_pinned(kRegion);
  ASSERT_TRUE(host.ok()) << host.message();
  DeviceBuffer dev = gpu->allocate(kRegion), small = gpu->allocate(kRegion);
  char* h = static_cast<char*>(host->data());
  std::vector<unsigned char> bytes(kRegion), got(kRegion);
  // Off (SYV_DEFER_COPIES=0; on by default): issued at the call.
  gpu->set_defer_copies(false);
  const uint64_t calls = gpu->deferred_copy_calls();
  gpu->defer_copies();
  gpu->wait_copy(gpu->copy_async(h, dev.data(), kRegion, CopyDir::kOut));
  EXPECT_EQ(gpu->deferred_copy_calls(), calls);
  gpu->flush_copies();
  gpu->set_defer_copies(true);
  // A deferred write-back, polled until it lands: the poll issues it; it read what the compute
  // stream wrote before the call.
  fill(bytes, 51);
  std::memset(h, 0, kRegion);
  gpu->defer_copies();
  gpu->upload(dev.data(), bytes.data(), kRegion);
  const CopyEvent out = gpu->copy_async(h, dev.data(), kRegion, CopyDir::kOut);
  EXPECT_EQ(gpu->deferred_copy_calls(), calls + 1);
  while (!gpu->copy_done(out)) {
  }
  EXPECT_EQ(std::memcmp(h, bytes.data(), kRegion), 0) << "polled deferred write-back";
  gpu->flush_copies();
  // A write-back, the load stream's wait for it and a load, all deferred, then flushed: the load
  // reads what the write-back wrote (the wait replayed after the write-back's event is recorded).
  fill(bytes, 52);
  std::memset(h, 0, kRegion);
  gpu->upload(dev.data(), bytes.data(), kRegion);
  gpu->defer_copies();
  const CopyEvent wb = gpu->copy_async(h, dev.data(), kRegion, CopyDir::kOut);
  gpu->order_copies_after_copy(wb, CopyDir::kIn);
  const CopyEvent load = gpu->copy_async(small.data(), h, kRegion, CopyDir::kIn);
  gpu->flush_copies();
  gpu->order_after_copy(load);
  gpu->download(got.data(), small.data(), kRegion);
  expect_same(got, bytes, "deferred load after a deferred write-back, stream to stream");
  // A deferred batch the compute stream is ordered after: order_after_copy() issues it first.
  fill(bytes, 53);
  std::memcpy(h, bytes.data(), kRegion);
  gpu->fill_zero(small.data(), kRegion);
  gpu->defer_copies();
  const std::vector<CopyOp> ops = {
      {small.data(), h, kRegion / 2},
      {static_cast<char*>(small.data()) + kRegion / 2, h + kRegion / 2, kRegion / 2}};
  gpu->order_after_copy(gpu->copy_batch_async(ops, CopyDir::kIn));
  gpu->download(got.data(), small.data(), kRegion);
  expect_same(got, bytes, "deferred batch waited for by the compute stream");
  gpu->flush_copies();
  gpu->set_defer_copies(false);
}

// The kernel itself, on a stream of the test's own, between two device buffers.
TEST(HostCopyGpu, GatherKernelCopiesEverySegment) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  DeviceBuffer a = gpu->allocate(kRegion), b = gpu->allocate(kRegion);
  std::vector<unsigned char> src(kRegion), dst(kRegion), got(kRegion);
  fill(src, 5);
  fill(dst, 6);
  gpu->upload(a.data(), src.data(), kRegion);
  gpu->upload(b.data(), dst.data(), kRegion);
  gpu->synchronize();
  const std::vector<CopyOp> ops =
      scattered(static_cast<char*>(b.data()), static_cast<char*>(a.data()), 16, 7);
  std::vector<cuda::CopySegment> segs;
  for (const CopyOp& op : ops) {
    segs.push_back({op.dst, op.src, op.bytes});
    ASSERT_TRUE(cuda::gather_copy_fits(segs.back()));
  }
  ASSERT_GT(segs.size(), 128u);  // more than one launch
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cuda::launch_gather_copy(segs.data(), segs.size(), s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  gpu->download(got.data(), b.data(), kRegion);
  expect_same(got,
              expected(ops, static_cast<char*>(b.data()), static_cast<char*>(a.data()), src, dst),
              "device -> device");
}

// A 32K-token prefix of the Qwen3-0.6B shape, roughly: pages of 56 rows of 128 KiB (K and V of 28
// layers), each a strided op, all in one copy_batch_async as the host tier issues a hit, against
// one cudaMemcpyAsync per row (copy_async) and one large copy of the same bytes.
TEST(HostCopyGpuTiming, PrintsGatherAndMemcpyRates) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  constexpr size_t kSeg = size_t{128} << 10, kPerPage = 56, kPages = 128;
  constexpr size_t kBytes = kSeg * kPerPage * kPages;  // 896 MiB
  auto pages = fault_in_host_pages(kBytes);
  ASSERT_TRUE(pages.ok()) << pages.message();
  const auto p0 = std::chrono::steady_clock::now();
  auto host = gpu->pin_host_pages(std::move(*pages));
  const uint64_t batches = gpu->batched_copies();
  const double pin_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
  ASSERT_TRUE(host.ok()) << host.message();
  DeviceBuffer dev = gpu->allocate(kBytes);
  char* h = static_cast<char*>(host->data());
  char* d = static_cast<char*>(dev.data());
  // The device side is strided like the cache store's per-layer buffers: segment (page p, part
  // k) at k * kPages * kSeg + p * kSeg; the host side holds each page's parts back to back.
  // A page is one strided op of kPerPage rows, as the cache store issues it.
  auto page_ops = [&](size_t p, bool to_device) {
    char* hp = h + p * kPerPage * kSeg;
    char* dp = d + p * kSeg;
    const size_t dev_pitch = kPages * kSeg;
    return std::vector<CopyOp>{to_device ? CopyOp{dp, hp, kSeg, kPerPage, dev_pitch, kSeg}
                                         : CopyOp{hp, dp, kSeg, kPerPage, kSeg, dev_pitch}};
  };
  double issue_us = 0;  // host time of the last rate()'s issue(), per page
  auto rate = [&](auto issue) {
    gpu->wait_copy(issue());  // warm-up, landed before the clock starts (synchronize() would
                              // wait for the compute stream only, not the copy stream)
    const auto t0 = std::chrono::steady_clock::now();
    CopyEvent last = issue();
    issue_us =
        1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kPages;
    gpu->wait_copy(last);
    return static_cast<double>(kBytes) / 1e9 /
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (bool to_device : {true, false}) {
    const CopyDir dir = to_device ? CopyDir::kIn : CopyDir::kOut;
    const CudaBackend::BatchCopyPath initial = gpu->batch_copy_path(dir);
    // Every page as one batch (a host hit's load), as the host tier issues it.
    auto batched = [&](CudaBackend::BatchCopyPath path) {
      gpu->set_batch_copy_path(dir, path);
      return rate([&] {
        std::vector<CopyOp> all;
        for (size_t p = 0; p < kPages; ++p) all.push_back(page_ops(p, to_device)[0]);
        return gpu->copy_batch_async(all, dir);
      });
    };
    const double engines = batched(CudaBackend::BatchCopyPath::kCopyEngines);
    const double engines_us = issue_us;
    const double gather = batched(CudaBackend::BatchCopyPath::kGatherKernel);
    const double gather_us = issue_us;
    gpu->set_batch_copy_path(dir, initial);
    const double memcpy_each = rate([&] {
      CopyEvent e;
      for (size_t p = 0; p < kPages; ++p) {
        const CopyOp op = page_ops(p, to_device)[0];
        for (size_t r = 0; r < op.rows; ++r)
          e = gpu->copy_async(op.row_dst(r), op.row_src(r), op.bytes, dir);
      }
      return e;
    });
    const double one = rate([&] {
      return to_device ? gpu->copy_async(d, h, kBytes, dir) : gpu->copy_async(h, d, kBytes, dir);
    });
    std::printf(
        "%s, %zu MiB in %zu pages of %zu x %zu KiB, one batch: cudaMemcpy3DBatchAsync %.1f GB/s "
        "(%.0f%% of one copy; host %.1f us a page), gather kernel %.1f GB/s (%.0f%%; host %.1f us "
        "a page), cudaMemcpyAsync per row %.1f GB/s, one copy %.1f GB/s\n",
        to_device ? "host -> device" : "device -> host", kBytes >> 20, kPages, kPerPage, kSeg >> 10,
        engines, 100.0 * engines / one, engines_us, gather, 100.0 * gather / one, gather_us,
        memcpy_each, one);
  }
  std::printf("pinning %zu MiB already faulted in (cudaHostRegister): %.3f s\n", kBytes >> 20,
              pin_s);
  int mapped = 0;
  ASSERT_EQ(
      cudaDeviceGetAttribute(&mapped, cudaDevAttrCanUseHostPointerForRegisteredMem, gpu->device()),
      cudaSuccess);
  if (mapped == 1) {
    EXPECT_EQ(gpu->batched_copies() - batches, 8u) << "the page batches went batched";
  }
}

}  // namespace
}  // namespace syv::testing
