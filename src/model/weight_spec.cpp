#include "model/weight_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/log.h"
#include "core/thread_pool.h"
#include "model/quant_weights.h"

namespace syv {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

RandomWeightDraw random_weight_draw(const WeightSpec& spec, uint64_t seed, uint64_t index) {
  RandomWeightDraw d;
  d.stream = splitmix64(seed ^ splitmix64(index + 1));
  // Uniform U(-s, s) has std s/sqrt(3): s = sqrt(3) * the wanted std.
  switch (spec.init) {
    case WeightInit::kNorm:
      d.scale = 0.1f;
      d.offset = 1.0f;
      break;
    case WeightInit::kEmbedding:
      d.scale = std::sqrt(3.0f);
      break;
    case WeightInit::kProjection:
      d.scale = std::sqrt(3.0f / static_cast<float>(spec.shape.empty() ? 1 : spec.shape.back()));
      break;
    case WeightInit::kZero:
      break;
  }
  return d;
}

void fill_random_weight(const WeightSpec& spec, uint64_t seed, uint64_t index, float* out) {
  const RandomWeightDraw draw = random_weight_draw(spec, seed, index);
  ThreadPool::global().parallel_for(
      spec.numel(),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = draw.value(i);
      },
      1 << 16);
}

namespace {

// n elements of `from` at src -> n elements of `to` at dst (F32, F16, BF16); a plain copy when
// the dtypes match.
void convert(DType from, const void* src, DType to, void* dst, size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * dtype_size(to));
    return;
  }
  if (to == DType::F32) {
    convert_to_f32(from, src, static_cast<float*>(dst), n);
    return;
  }
  constexpr size_t kBlock = 2048;
  float tmp[kBlock];
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t m = std::min(kBlock, n - b);
    const float* f = tmp;
    if (from == DType::F32) {
      f = static_cast<const float*>(src) + b;
    } else {
      convert_to_f32(from, static_cast<const uint16_t*>(src) + b, tmp, m);
    }
    if (to == DType::BF16) {
      for (size_t i = 0; i < m; ++i) out[b + i] = f32_to_bf16(f[i]);
    } else {
      for (size_t i = 0; i < m; ++i) out[b + i] = f32_to_f16(f[i]);
    }
  }
}

// "16.38 GB", "19.2 MB", "688.0 kB".
std::string human_bytes(double bytes) {
  char buf[32];
  if (bytes >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  } else if (bytes >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  }
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

WeightLoader::WeightLoader(Backend& backend, const WeightStore* store, uint64_t seed,
                           const QuantConfig& quant)
    : backend_(backend),
      store_(store),
      seed_(seed),
      quant_(quant),
      start_(std::chrono::steady_clock::now()) {}

WeightLoader::~WeightLoader() {
  finish();
}

BulkUploader& WeightLoader::uploader() {
  if (!uploader_) uploader_ = make_bulk_uploader(backend_);
  return *uploader_;
}

Result<const TensorInfo*> WeightLoader::checked(const WeightSpec& spec) const {
  return check_weight_in_store(spec, *store_);
}

Result<const TensorInfo*> check_weight_in_store(const WeightSpec& spec, const WeightStore& store) {
  const TensorInfo* info = store.find(spec.name);
  if (info == nullptr) {
    return Status::Error("missing tensor \"" + spec.name + "\" (expected shape " +
                         shape_string(spec.shape) + ") in the model's safetensors files");
  }
  if (info->shape != spec.shape) {
    return Status::Error(info->file + ": tensor \"" + spec.name + "\" has shape " +
                         shape_string(info->shape) + ", config expects " +
                         shape_string(spec.shape));
  }
  if (info->dtype != DType::F32 && info->dtype != DType::F16 && info->dtype != DType::BF16) {
    return Status::Error(info->file + ": tensor \"" + spec.name + "\" has dtype " +
                         std::string(dtype_name(info->dtype)) +
                         ", expected f32, f16 or bf16 (quantized weights are read only as "
                         "config.json's quantization_config describes)");
  }
  return info;
}

Status check_spec_in_store(const WeightSpec& spec, const WeightStore& store,
                           const QuantConfig& quant) {
  if (stored_quantized(spec.name, store, quant)) {
    return check_quantized(spec.name, spec.shape, store, quant);
  }
  Result<const TensorInfo*> info = check_weight_in_store(spec, store);
  return info.ok() ? Status::Ok() : info.status();
}

namespace {

// Whether the loader keeps this g_idx tensor: present and not the plain k / group_size, which
// read_quantized() drops (GPTQ writers store that one even without act-order). A tensor of the
// wrong shape or dtype counts as kept (check_quantized() refuses it anyway).
bool kept_g_idx(const TensorInfo* t, int64_t K, const QuantConfig& quant) {
  if (t == nullptr) return false;
  if (t->dtype != DType::I32 || t->numel() != K) return true;
  const int64_t G = quant.group_size > 0 ? quant.group_size : K;
  for (int64_t k = 0; k < K; ++k) {
    int32_t g;
    std::memcpy(&g, static_cast<const uint8_t*>(t->data) + 4 * k, 4);
    if (g != k / G) return true;
  }
  return false;
}

}  // namespace

QuantWeightRole quant_weight_role(const std::string& weight_name) {
  if (weight_name == "lm_head.weight") return QuantWeightRole::kOutputProjection;
  if (weight_name.find(".experts.") != std::string::npos) return QuantWeightRole::kStackedExperts;
  return QuantWeightRole::kLinear;
}

std::optional<int64_t> quantized_spec_bytes(const WeightSpec& spec, const WeightStore* store,
                                            const QuantConfig& quant) {
  if (store == nullptr || spec.shape.size() != 2 || spec.init == WeightInit::kEmbedding ||
      !stored_quantized(spec.name, *store, quant)) {
    return std::nullopt;
  }
  const std::string m = spec.name.substr(0, spec.name.size() - 7);  // "<m>.weight"
  const TensorInfo* g_idx = store->find(m + ".g_idx");
  if (g_idx == nullptr) g_idx = store->find(m + ".weight_g_idx");
  return quantized_weight_bytes(spec.shape, quant, kept_g_idx(g_idx, spec.shape[1], quant));
}

bool WeightLoader::quantized(const WeightSpec& spec) const {
  return store_ != nullptr && stored_quantized(spec.name, *store_, quant_);
}

DeviceBuffer WeightLoader::upload_bytes(const void* src, size_t bytes) {
  DeviceBuffer buf = backend_.allocate(bytes);
  device_bytes_ += static_cast<int64_t>(bytes);
  const auto* from = static_cast<const uint8_t*>(src);
  uploader().write(buf.data(), bytes,
                   [from](size_t off, size_t n, void* host) { std::memcpy(host, from + off, n); });
  return buf;
}

DeviceWeight WeightLoader::upload_quantized(HostQuantWeight& h, QuantWeightRole role) {
  if (!h.g_idx.empty() && backend_.takes_permuted_act_order()) permute_act_order(h);
  DeviceWeight w;
  backend_.synchronize();
  w.buffer = upload_bytes(h.data.data(), h.data.size());
  w.scale_buffer = upload_bytes(h.scales.data(), h.scales.size() * sizeof(float));
  if (!h.zeros.empty()) w.zero_buffer = upload_bytes(h.zeros.data(), h.zeros.size());
  if (!h.g_idx.empty()) {
    w.index_buffer = upload_bytes(h.g_idx.data(), h.g_idx.size() * sizeof(int32_t));
  } else if (!h.perm.empty()) {  // (a weight has one or the other)
    w.index_buffer = upload_bytes(h.perm.data(), h.perm.size() * sizeof(int32_t));
  }
  const Weight v = h.view();
  static_cast<Weight&>(w) = v;
  w.tensor.data = w.buffer.data();
  w.scales.data = w.scale_buffer.data();
  if (!w.zeros.empty()) w.zeros.data = w.zero_buffer.data();
  if (!w.g_idx.empty()) w.g_idx.data = w.index_buffer.data();
  if (!w.perm.empty()) w.perm.data = w.index_buffer.data();
  backend_.reserve_quantized_scratch(w, role);
  pending_ = true;
  return w;
}

Result<DeviceWeight> WeightLoader::load_quantized(const std::vector<WeightSpec>& specs) {
  std::vector<HostQuantWeight> parts;
  bool all = specs[0].init != WeightInit::kEmbedding;  // a table lookup takes dense rows
  for (const WeightSpec& spec : specs) {
    if (!quantized(spec)) {
      all = false;
      continue;
    }
    SYV_ASSIGN_OR_RETURN(HostQuantWeight w, read_quantized(spec.name, spec.shape, *store_, quant_));
    parts.push_back(std::move(w));
  }
  std::optional<HostQuantWeight> joined;
  if (all) joined = concat_quantized(std::move(parts));
  if (!joined) {  // dense: each part dequantized (or read as it is)
    std::string names;
    for (const WeightSpec& spec : specs) names += (names.empty() ? "" : ", ") + spec.name;
    SYV_LOG(INFO) << "load: " << names << " loaded dequantized ("
                  << (all ? "the parts' quantized layouts differ"
                      : specs[0].init == WeightInit::kEmbedding
                          ? "an embedding table is read by rows"
                          : "some parts are not quantized")
                  << ")";
    std::vector<int64_t> shape = specs[0].shape;
    std::vector<float> values;
    const int64_t logged = dequantized_reads_;  // (this group has its own line)
    for (size_t i = 0; i < specs.size(); ++i) {
      DType dtype;
      SYV_ASSIGN_OR_RETURN(std::vector<float> v, read_f32(specs[i], &dtype));
      values.insert(values.end(), v.begin(), v.end());
      dequantized_reads_ = logged;
      if (i > 0) shape[0] += specs[i].shape[0];
    }
    return upload(shape, DType::BF16, values.data());
  }
  DeviceWeight w = upload_quantized(*joined, quant_weight_role(specs[0].name));
  for (const WeightSpec& spec : specs) {
    parameters_ += spec.numel();
    ++next_index_;
    ++tensors_;
  }
  progress(w.bytes());
  pending_ = true;
  return w;
}

DeviceWeight WeightLoader::allocate(const std::vector<int64_t>& shape, DType dtype, bool host) {
  SYV_CHECK(!shape.empty() && shape.size() <= 2) << "weights are 1-D or 2-D";
  SYV_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16)
      << "weight dtype " << dtype_name(dtype);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  DeviceWeight w;
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  w.buffer = host ? backend_.allocate_host_resident(bytes) : backend_.allocate(bytes);
  w.set_dense(shape.size() == 1 ? w.buffer.view(dtype, {shape[0]})
                                : w.buffer.view(dtype, {shape[0], shape[1]}));
  parameters_ += n;
  (host ? host_bytes_ : device_bytes_) += static_cast<int64_t>(w.buffer.bytes());
  pending_ = true;
  return w;
}

void WeightLoader::progress(size_t bytes) {
  bytes_done_ += bytes;
  const double t = seconds_since(start_);
  if (t - last_report_s_ < 2.0) return;
  last_report_s_ = t;
  std::string line = "load: " + human_bytes(static_cast<double>(bytes_done_));
  if (store_ != nullptr) {
    const double total = static_cast<double>(store_->total_bytes());
    line += " of " + human_bytes(total) + " (" +
            std::to_string(
                static_cast<int>(100.0 * static_cast<double>(bytes_done_) / std::max(total, 1.0))) +
            "%)";
  }
  line += " in " + fixed(t, 1) + " s (" +
          fixed(static_cast<double>(bytes_done_) / 1e9 / std::max(t, 1e-9), 2) + " GB/s)";
  SYV_LOG(INFO) << line;
}

Result<DeviceWeight> WeightLoader::load(const WeightSpec& spec) {
  return load_concat({spec});
}

Result<DeviceWeight> WeightLoader::load_concat(const std::vector<WeightSpec>& specs) {
  SYV_ASSIGN_OR_RETURN(DeviceWeight w, load_concat_unnoted(specs));
  std::vector<std::string> names;
  for (const WeightSpec& spec : specs) names.push_back(spec.name);
  note_sources(w, std::move(names));
  return w;
}

void WeightLoader::note_sources(const DeviceWeight& w, std::vector<std::string> names) {
  note_sources_from_row(w, 0, std::move(names));
}

void WeightLoader::note_sources_from_row(const DeviceWeight& w, int64_t first_row,
                                         std::vector<std::string> names) {
  if (sources_ == nullptr || w.tensor.data == nullptr) return;
  SYV_CHECK(first_row >= 0 && first_row * w.tensor.dim(-1) <= w.tensor.numel())
      << "note_sources_from_row: row " << first_row << " of a weight of " << w.tensor.numel()
      << " elements";
  const void* at = static_cast<const char*>(w.tensor.data) +
                   first_row * w.tensor.dim(-1) * static_cast<int64_t>(dtype_size(w.tensor.dtype));
  std::vector<std::string>& noted = (*sources_)[at];
  for (std::string& name : names) {
    if (std::find(noted.begin(), noted.end(), name) == noted.end())
      noted.push_back(std::move(name));
  }
}

Result<DeviceWeight> WeightLoader::load_concat_unnoted(const std::vector<WeightSpec>& specs) {
  SYV_CHECK(!specs.empty()) << "load_concat of no weights";
  const size_t rank = specs[0].shape.size();
  std::vector<int64_t> shape = specs[0].shape;
  SYV_CHECK(rank == 1 || rank == 2) << specs[0].name << ": weights are 1-D or 2-D";
  for (size_t i = 1; i < specs.size(); ++i) {
    SYV_CHECK(specs[i].shape.size() == rank && (rank == 1 || specs[i].shape[1] == shape[1]))
        << "load_concat: " << specs[i].name << " " << shape_string(specs[i].shape)
        << " does not stack under " << specs[0].name << " " << shape_string(specs[0].shape);
    shape[0] += specs[i].shape[0];
  }

  // An embedding table kept in host-resident memory (keep_embeddings_on_host), where that frees
  // device memory (on the CPU backend every weight is host memory already).
  const bool host = host_embeddings_ && backend_.host_resident_frees_device_memory() &&
                    specs.size() == 1 && rank == 2 && specs[0].init == WeightInit::kEmbedding;
  if (store_ == nullptr) {  // random weights, drawn by the backend
    const DType dtype = backend_.weight_dtype(DType::BF16);
    DeviceWeight w = allocate(shape, dtype, host);
    size_t offset = 0;
    for (const WeightSpec& spec : specs) {
      const RandomWeightDraw draw = random_weight_draw(spec, seed_, next_index_++);
      const size_t bytes = static_cast<size_t>(spec.numel()) * dtype_size(dtype);
      void* dst = static_cast<uint8_t*>(w.buffer.data()) + offset;
      if (draw.scale == 0.0f && draw.offset == 0.0f) {
        backend_.fill_zero(dst, bytes);
      } else if (draw.offset == 0.0f) {
        backend_.fill_random(dst, dtype, spec.numel(), draw.stream, draw.scale);
      } else {  // norms (small): offset + uniform, drawn on the host
        const size_t esize = dtype_size(dtype);
        uploader().write(dst, bytes, [&](size_t off, size_t n, void* host) {
          const size_t first = off / esize, count = n / esize;
          float tmp[256];
          for (size_t b = 0; b < count; b += 256) {
            const size_t m = std::min<size_t>(256, count - b);
            for (size_t i = 0; i < m; ++i) tmp[i] = draw.value(static_cast<int64_t>(first + b + i));
            convert(DType::F32, tmp, dtype, static_cast<uint8_t*>(host) + (b * esize), m);
          }
        });
      }
      offset += bytes;
      ++tensors_;
      progress(bytes);
    }
    return w;
  }

  for (const WeightSpec& spec : specs) {
    if (rank == 2 && quantized(spec)) return load_quantized(specs);
  }
  std::vector<const TensorInfo*> infos;
  for (const WeightSpec& spec : specs) {
    SYV_ASSIGN_OR_RETURN(const TensorInfo* info, checked(spec));
    infos.push_back(info);
  }
  std::vector<RowRange> whole;  // every part's rows (1-D parts: elements, rows of width 1)
  for (size_t i = 0; i < specs.size(); ++i) whole.push_back({i, 0, specs[i].shape[0]});
  return copy_file_rows(infos, whole, shape, rank == 2 ? shape[1] : 1, host);
}

DeviceWeight WeightLoader::copy_file_rows(const std::vector<const TensorInfo*>& infos,
                                          const std::vector<RowRange>& ranges,
                                          const std::vector<int64_t>& shape, int64_t width,
                                          bool host) {
  const DType dtype = backend_.weight_dtype(infos[0]->dtype);
  DeviceWeight w = allocate(shape, dtype, host);
  // Orders the copies after anything the backend's own stream may still do to fresh memory.
  backend_.synchronize();
  const size_t esize = dtype_size(dtype);
  size_t offset = 0;
  for (const RowRange& r : ranges) {
    const TensorInfo* info = infos[r.part];
    const size_t src_size = dtype_size(info->dtype);
    const auto* src =
        static_cast<const uint8_t*>(info->data) + static_cast<size_t>(r.first * width) * src_size;
    const size_t n = static_cast<size_t>(r.count * width);
    uploader().write(static_cast<uint8_t*>(w.buffer.data()) + offset, n * esize,
                     [&](size_t off, size_t bytes, void* host) {
                       convert(info->dtype, src + off / esize * src_size, dtype, host,
                               bytes / esize);
                     });
    offset += n * esize;
    progress(n * src_size);  // the rows' file bytes
    if (r.first == 0) {      // a weight counts once, with its first row
      ++next_index_;
      ++tensors_;
    }
  }
  return w;
}

bool WeightLoader::slices_rows(const std::vector<WeightSpec>& specs) const {
  if (store_ == nullptr || specs.empty()) return false;
  const bool first_quantized = quantized(specs[0]);
  for (const WeightSpec& spec : specs) {
    if (spec.shape.size() != 2 || quantized(spec) != first_quantized) return false;
  }
  return true;
}

Result<DeviceWeight> WeightLoader::load_rows_quantized(const std::vector<WeightSpec>& specs,
                                                       const std::vector<RowRange>& ranges,
                                                       int64_t rows) {
  std::vector<HostQuantWeight> parts;
  for (const WeightSpec& spec : specs) {
    SYV_ASSIGN_OR_RETURN(HostQuantWeight w, read_quantized(spec.name, spec.shape, *store_, quant_));
    parts.push_back(std::move(w));
  }
  std::vector<HostQuantWeight> slices;
  for (const RowRange& r : ranges) {
    slices.push_back(slice_rows(parts[r.part], r.first, r.count));
    if (r.first == 0) {  // a weight counts once, with its first row
      ++next_index_;
      ++tensors_;
    }
  }
  const int64_t width = specs[0].shape[1];
  std::optional<HostQuantWeight> joined = concat_quantized(std::move(slices));
  if (!joined) {  // the parts' layouts differ: their rows dequantized
    std::string names;
    for (const WeightSpec& spec : specs) names += (names.empty() ? "" : ", ") + spec.name;
    SYV_LOG(INFO) << "load: " << names
                  << " loaded dequantized (the parts' quantized layouts differ)";
    std::vector<float> values;
    for (const RowRange& r : ranges) {
      const size_t at = values.size();
      values.resize(at + static_cast<size_t>(r.count * width));
      dequantize_rows(parts[r.part].view(), r.first, r.count, values.data() + at);
    }
    return upload({rows, width}, DType::BF16, values.data());  // (counts the parameters)
  }
  parameters_ += rows * width;
  DeviceWeight w = upload_quantized(*joined, quant_weight_role(specs[0].name));
  progress(w.bytes());
  return w;
}

Result<DeviceWeight> WeightLoader::load_rows(const std::vector<WeightSpec>& specs,
                                             const std::vector<RowRange>& ranges) {
  SYV_ASSIGN_OR_RETURN(DeviceWeight w, load_rows_unnoted(specs, ranges));
  std::vector<std::string> names;
  for (const RowRange& r : ranges) names.push_back(specs[r.part].name);
  note_sources(w, std::move(names));
  return w;
}

Result<DeviceWeight> WeightLoader::load_rows_unnoted(const std::vector<WeightSpec>& specs,
                                                     const std::vector<RowRange>& ranges) {
  SYV_CHECK(slices_rows(specs)) << "load_rows: random weights, or quantized and float ones mixed "
                                   "(read_f32 them)";
  SYV_CHECK(!specs.empty() && !ranges.empty()) << "load_rows of no rows";
  int64_t rows = 0;
  for (const RowRange& r : ranges) {
    SYV_CHECK(r.part < specs.size() && r.first >= 0 && r.count >= 0 &&
              r.first + r.count <= specs[r.part].shape[0])
        << "load_rows: rows [" << r.first << ", " << r.first + r.count << ") of part " << r.part;
    rows += r.count;
  }
  if (quantized(specs[0])) return load_rows_quantized(specs, ranges, rows);
  const int64_t width = specs[0].shape[1];
  std::vector<const TensorInfo*> infos;
  for (const WeightSpec& spec : specs) {
    SYV_CHECK(spec.shape[1] == width)
        << "load_rows: " << spec.name << " " << shape_string(spec.shape) << " does not stack under "
        << specs[0].name << " " << shape_string(specs[0].shape);
    SYV_ASSIGN_OR_RETURN(const TensorInfo* info, checked(spec));
    infos.push_back(info);
  }
  return copy_file_rows(infos, ranges, {rows, width}, width);
}

DeviceWeight WeightLoader::upload(const std::vector<int64_t>& shape, DType file_dtype,
                                  const float* values) {
  const DType dtype = backend_.weight_dtype(file_dtype);
  DeviceWeight w = allocate(shape, dtype);
  backend_.synchronize();
  const size_t esize = dtype_size(dtype);
  uploader().write(w.buffer.data(), w.buffer.bytes(), [&](size_t off, size_t bytes, void* host) {
    convert(DType::F32, values + off / esize, dtype, host, bytes / esize);
  });
  if (store_ == nullptr) progress(w.buffer.bytes());  // read_f32 counted the file bytes
  return w;
}

Result<std::vector<float>> WeightLoader::read_f32(const WeightSpec& spec, DType* file_dtype) {
  std::vector<float> values(static_cast<size_t>(spec.numel()));
  const uint64_t index = next_index_++;
  if (store_ == nullptr) {
    fill_random_weight(spec, seed_, index, values.data());
    *file_dtype = DType::BF16;
    ++tensors_;
    return values;
  }
  if (spec.shape.size() == 2 && quantized(spec)) {
    SYV_ASSIGN_OR_RETURN(HostQuantWeight q, read_quantized(spec.name, spec.shape, *store_, quant_));
    values = q.dequantize();
    *file_dtype = DType::BF16;  // upload() keeps it as the backend keeps bf16
    ++tensors_;
    if (dequantized_reads_++ == 0) first_dequantized_ = spec.name;
    progress(q.data.size());
    return values;
  }
  SYV_ASSIGN_OR_RETURN(const TensorInfo* info, checked(spec));
  const size_t src_size = dtype_size(info->dtype);
  const auto* src = static_cast<const uint8_t*>(info->data);
  ThreadPool::global().parallel_for(
      static_cast<int64_t>(values.size()),
      [&](int64_t begin, int64_t end) {
        convert_to_f32(info->dtype, src + static_cast<size_t>(begin) * src_size,
                       values.data() + begin, static_cast<size_t>(end - begin));
      },
      1 << 18);
  *file_dtype = info->dtype;
  ++tensors_;
  progress(info->bytes);
  return values;
}

void WeightLoader::finish() {
  if (!pending_) return;
  pending_ = false;
  if (uploader_) uploader_->finish();
  backend_.synchronize();
  const double t = seconds_since(start_);
  const auto bytes = static_cast<double>(device_bytes_);
  std::string line = "load: " + human_bytes(bytes) + " in " + fixed(t, 2) + " s (" +
                     fixed(bytes / 1e9 / std::max(t, 1e-9), 2) + " GB/s) on " + backend_.name() +
                     ", " + std::to_string(tensors_) + " tensors";
  if (store_ != nullptr) {
    line += " (" + human_bytes(static_cast<double>(bytes_done_)) + ") from " +
            std::to_string(store_->files().size()) + " file(s)";
  } else {
    line += " of random values drawn by the backend";
  }
  if (host_bytes_ > 0) {
    line += "; " + human_bytes(static_cast<double>(host_bytes_)) +
            " of embedding table in host memory (--host-embeddings)";
  }
  SYV_LOG(INFO) << line;
  if (dequantized_reads_ > 0) {
    SYV_LOG(INFO) << "load: " << dequantized_reads_
                  << " quantized tensor(s) loaded dequantized (weights the model re-arranges on "
                     "the host, e.g. \""
                  << first_dequantized_ << "\")";
    dequantized_reads_ = 0;
  }
}

}  // namespace syv
