// Pinned host memory copy-rate probe (issue 17): how fast one 1 GiB host->device and device->host
// copy runs from host memory pinned in each of the ways the host tier could pin it, and how long
// the pinning takes. Prints the kernel's transparent-huge-page settings and how much of each
// buffer the kernel backed with huge pages (AnonHugePages of /proc/self/smaps_rollup).
//   nvcc -O2 -o /tmp/pinned_copy_probe tools/device/probes/pinned_copy_probe.cu && /tmp/pinned_copy_probe
#include <cuda_runtime.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t e = (x);                                                                 \
    if (e != cudaSuccess) {                                                              \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));      \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static std::string first_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

static long anon_huge_kib() {
  std::ifstream f("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("AnonHugePages:", 0) == 0) {
      std::istringstream in(line.substr(14));
      long v = 0;
      in >> v;
      return v;
    }
  }
  return -1;
}

static void rate(const char* label, void* host, size_t bytes, void* dev, double pin_s, long huge) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  float h2d = 1e9f, d2h = 1e9f;
  for (int rep = 0; rep < 3; ++rep) {
    float ms = 0;
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (ms < h2d) h2d = ms;
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (ms < d2h) d2h = ms;
  }
  std::printf("%-44s pin %.3f s  h2d %.1f GB/s  d2h %.1f GB/s  huge %ld MiB\n", label, pin_s,
              bytes / (h2d * 1e6), bytes / (d2h * 1e6), huge / 1024);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
}

constexpr int kMpolFNode = 1, kMpolFAddr = 2;  // <numaif.h> MPOL_F_NODE, MPOL_F_ADDR
// The NUMA node holding the page at p (get_mempolicy, no libnuma needed), or -1.
static int node_of(void* p) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0, p, kMpolFNode | kMpolFAddr) != 0) return -1;
  return node;
}

static void* map_touch(size_t bytes, bool advise_huge, int extra_flags, bool sparse_touch = false) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (advise_huge) madvise(p, bytes, MADV_HUGEPAGE);
  if (sparse_touch) {  // as fault_in_host_pages does: one byte written per 4 KiB
    volatile char* c = static_cast<volatile char*>(p);
    for (size_t i = 0; i < bytes; i += 4096) c[i] = 0;
  } else {
    std::memset(p, 1, bytes);
  }
  return p;
}

int main() {
  const size_t bytes = size_t{1} << 30;
  std::printf("THP enabled: %s\nTHP defrag: %s\nnr_hugepages: %s\niommu groups: %s\n",
              first_line("/sys/kernel/mm/transparent_hugepage/enabled").c_str(),
              first_line("/sys/kernel/mm/transparent_hugepage/defrag").c_str(),
              first_line("/proc/sys/vm/nr_hugepages").c_str(),
              system("ls /sys/kernel/iommu_groups 2>/dev/null | wc -l | tr -d '\\n'") == 0 ? "" : "?");
  CHECK(cudaSetDevice(0));
  void* dev = nullptr;
  CHECK(cudaMalloc(&dev, bytes));
  {
    const double t = now_s();
    void* p = nullptr;
    CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    const double pin = now_s() - t;
    std::memset(p, 1, bytes);
    rate("cudaHostAlloc portable|mapped", p, bytes, dev, pin, 0);
    CHECK(cudaFreeHost(p));
  }
  {
    const double t = now_s();
    void* p = nullptr;
    CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    const double pin = now_s() - t;
    rate("cudaHostAlloc default", p, bytes, dev, pin, 0);
    CHECK(cudaFreeHost(p));
  }
  struct Way {
    const char* label;
    bool huge;
    int flags;
    unsigned reg;
    bool sparse = false;
  } ways[] = {
      {"fault_in_host_pages way (sparse touch) + reg p|m", true, 0,
       cudaHostRegisterPortable | cudaHostRegisterMapped, true},
      {"mmap 4K + register portable|mapped", false, 0, cudaHostRegisterPortable | cudaHostRegisterMapped},
      {"mmap MADV_HUGEPAGE + register portable|mapped", true, 0,
       cudaHostRegisterPortable | cudaHostRegisterMapped},
      {"mmap MADV_HUGEPAGE + register default", true, 0, cudaHostRegisterDefault},
      {"mmap MAP_HUGETLB + register portable|mapped", false, MAP_HUGETLB,
       cudaHostRegisterPortable | cudaHostRegisterMapped},
  };
  for (const Way& w : ways) {
    const long before = anon_huge_kib();
    void* p = map_touch(bytes, w.huge, w.flags, w.sparse);
    if (p == nullptr) {
      std::printf("%-44s mmap failed\n", w.label);
      continue;
    }
    const long huge = anon_huge_kib() - before;
    std::printf("  (buffer on NUMA node %d, thread on cpu %d)\n", node_of(p), sched_getcpu());
    const double t = now_s();
    CHECK(cudaHostRegister(p, bytes, w.reg));
    const double pin = now_s() - t;
    rate(w.label, p, bytes, dev, pin, huge);
    CHECK(cudaHostUnregister(p));
    munmap(p, bytes);
  }
  // The host tier's pieces: 8 x 128 MiB pinned one at a time, copied as one 1 GiB gather.
  {
    const size_t piece = size_t{128} << 20;
    double alloc_s = 0;
    void* pieces[8];
    for (auto& q : pieces) {
      const double t = now_s();
      CHECK(cudaHostAlloc(&q, piece, cudaHostAllocPortable | cudaHostAllocMapped));
      alloc_s += now_s() - t;
      std::memset(q, 1, piece);
    }
    std::printf("cudaHostAlloc 128 MiB pieces: %.1f ms each\n", alloc_s / 8 * 1e3);
    for (auto& q : pieces) CHECK(cudaFreeHost(q));
  }
  CHECK(cudaFree(dev));
  return 0;
}
