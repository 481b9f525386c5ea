#include "kv/cache_store.h"

#include <sstream>
#include <string>

#include "core/check.h"

namespace syv {

namespace {

void check_index(int32_t i, int32_t n, const char* what) {
  SYV_CHECK(i >= 0 && i < n) << what << " " << i << " outside [0, " << n << ")";
}

char* at(const DeviceBuffer& buf, int64_t index, int64_t bytes) {
  return static_cast<char*>(buf.data()) + index * bytes;
}

// The KV dtype of one layer against what the backend has kernels for (`requested`: named by
// CacheConfig::kv_dtype rather than declared by the model).
Status check_kv_dtype(const KvLayerShape& s, const Backend& backend, bool requested) {
  const std::string name(dtype_name(s.dtype));
  const bool quantized = s.dtype == DType::F8E4M3 || s.dtype == DType::U4X2;
  const bool is_float = s.dtype == DType::F32 || s.dtype == DType::BF16 || s.dtype == DType::F16;
  if (!quantized && !is_float) {
    return Status::Error("cache spec: KV cache dtype " + name +
                         " is not supported (float KV, fp8 e4m3 or int4 u4x2)");
  }
  if (s.dtype == DType::U4X2 && s.head_dim % kKvInt4Group != 0) {
    return Status::Error("cache config: KV cache dtype int4 needs head_dim % " +
                         std::to_string(kKvInt4Group) + " == 0 (one scale per group of " +
                         std::to_string(kKvInt4Group) + "), found head_dim " +
                         std::to_string(s.head_dim));
  }
  if ((requested || quantized) && !backend.supports_kv_dtype(s.dtype)) {
    return Status::Error("cache config: KV cache dtype " + name + " is not supported on backend " +
                         backend.name() + " (it stores KV in " +
                         std::string(dtype_name(backend.activation_dtype())) +
                         (quantized ? "; its quantized-KV kernels are not there yet)" : ")"));
  }
  if (!backend.supports_kv_head_dim(s.dtype, s.head_dim)) {
    return Status::Error("cache config: KV cache dtype " + name + " on backend " + backend.name() +
                         " has no kernels for head_dim " + std::to_string(s.head_dim) +
                         " (use the activation dtype's KV cache)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<CacheStore>> CacheStore::create(const CacheSpec& spec,
                                                       const CacheConfig& config,
                                                       Backend& backend) {
  if (!spec.kv_layers.empty() && (config.page_size <= 0 || config.num_pages <= 0)) {
    return Status::Error("cache config: page_size and num_pages must be positive, found " +
                         std::to_string(config.page_size) + " and " +
                         std::to_string(config.num_pages));
  }
  if (!spec.state_layers.empty() && config.num_state_slots <= 0) {
    return Status::Error(
        "cache config: a model with recurrent layers needs num_state_slots > 0 (one per running "
        "sequence), found " +
        std::to_string(config.num_state_slots));
  }
  if (config.num_checkpoints < 0 || config.num_state_slots < 0 || config.num_pages < 0) {
    return Status::Error(
        "cache config: num_pages, num_state_slots and num_checkpoints must be >= "
        "0, found " +
        std::to_string(config.num_pages) + ", " + std::to_string(config.num_state_slots) + " and " +
        std::to_string(config.num_checkpoints));
  }
  // A float KV dtype the model declares has a layout on every backend (the model picks its
  // backend's); a requested one (config.kv_dtype) and any quantized one need the backend's kernels.
  CacheSpec effective = spec;
  if (config.kv_dtype) effective = effective.with_kv_dtype(*config.kv_dtype);
  for (const KvLayerShape& s : effective.kv_layers) {
    SYV_RETURN_IF_ERROR(check_kv_dtype(s, backend, config.kv_dtype.has_value()));
  }
  if (config.state_dtype && !spec.state_layers.empty()) {
    const DType st = *config.state_dtype;
    if (!backend.supports_state_dtype(st)) {
      return Status::Error("cache config: recurrent state dtype " + std::string(dtype_name(st)) +
                           " is not supported on backend " + backend.name() +
                           " (its delta-rule kernels keep the state in f32); use --state-dtype "
                           "fp32");
    }
    effective = effective.with_state_dtype(st);
  }
  return std::unique_ptr<CacheStore>(new CacheStore(effective, config, backend));
}

CacheStore::CacheStore(const CacheSpec& spec, const CacheConfig& config, Backend& backend)
    : spec_(spec), config_(config), backend_(backend) {
  int32_t kv = 0, state = 0;
  for (LayerCacheKind kind : spec_.layer_kinds)
    index_.push_back(kind == LayerCacheKind::kPagedKV ? kv++ : state++);
  SYV_CHECK(kv == static_cast<int32_t>(spec_.kv_layers.size()) &&
            state == static_cast<int32_t>(spec_.state_layers.size()))
      << "cache spec: layer_kinds names " << kv << " attention and " << state
      << " recurrent layers, shapes are given for " << spec_.kv_layers.size() << " and "
      << spec_.state_layers.size() << " (build specs with add_kv_layer / add_state_layer)";
  // Every attention layer's K and V values in one buffer, their scales (quantized KV) in another:
  // rows K_0, V_0, K_1, V_1, ... each spanning every page (page p's part at p * part bytes), back
  // to back, so that rows of equal part bytes sit at one pitch (and the pool is exactly its
  // pages' bytes).
  const int64_t pages = config_.num_pages, page_size = config_.page_size;
  auto add_rows = [&](DeviceBuffer& buf, bool scales) {
    const size_t first = page_parts_.size();
    int64_t offset = 0;
    for (const KvLayerShape& s : spec_.kv_layers) {
      const int64_t part =
          (scales ? s.scale_bytes_per_token() : s.value_bytes_per_token()) / 2 * page_size;
      if (part == 0) continue;
      for (int kv = 0; kv < 2; ++kv) {
        page_parts_.push_back({nullptr, part, offset});
        offset += pages * part;
      }
    }
    if (offset == 0) return;
    buf = backend_.allocate(static_cast<size_t>(offset));
    total_bytes_ += offset;
    for (size_t i = first; i < page_parts_.size(); ++i)
      page_parts_[i].base = static_cast<char*>(buf.data()) + page_parts_[i].offset;
  };
  add_rows(values_, /*scales=*/false);
  add_rows(scales_, /*scales=*/true);
  SYV_CHECK(page_parts_.size() == 2 * spec_.kv_layers.size() ||
            page_parts_.size() == 4 * spec_.kv_layers.size())
      << "cache store: every attention layer has values, and scales either all or none";
  // Runs of consecutive parts with equal bytes at one pitch: one strided copy per page each.
  for (size_t i = 0; i < page_parts_.size(); ++i) {
    const PagePart& p = page_parts_[i];
    if (!page_runs_.empty()) {
      PageRun& run = page_runs_.back();
      const PagePart& last = page_parts_[static_cast<size_t>(run.first + run.rows - 1)];
      const int64_t pitch = p.base - last.base;
      if (last.bytes == p.bytes && pitch > 0 && (run.rows == 1 || pitch == run.pitch)) {
        run.pitch = pitch;
        ++run.rows;
        continue;
      }
    }
    page_runs_.push_back({static_cast<int32_t>(i), 1, p.bytes});
  }
  auto state_buffers = [&](const StateLayerShape& s, int32_t n) {
    StateBuffers b;
    b.conv = backend_.allocate(static_cast<size_t>(s.conv_bytes() * n));
    b.ssm = backend_.allocate(static_cast<size_t>(s.ssm_bytes() * n));
    backend_.fill_zero(b.conv.data(), b.conv.bytes());
    backend_.fill_zero(b.ssm.data(), b.ssm.bytes());
    total_bytes_ += s.bytes() * n;
    return b;
  };
  for (const StateLayerShape& s : spec_.state_layers) {
    slots_.push_back(state_buffers(s, config_.num_state_slots));
    ckpt_.push_back(state_buffers(s, config_.num_checkpoints));
  }
}

CacheStore::~CacheStore() {
  backend_.synchronize();  // no op or copy may still use the buffers
}

CacheStore::KvView CacheStore::kv_view(int32_t layer) const {
  check_index(layer, static_cast<int32_t>(spec_.layer_kinds.size()), "cache layer");
  SYV_CHECK(spec_.layer_kinds[static_cast<size_t>(layer)] == LayerCacheKind::kPagedKV)
      << "layer " << layer << " has recurrent state, not KV pages";
  const size_t i = static_cast<size_t>(index_[static_cast<size_t>(layer)]);
  const KvLayerShape& s = spec_.kv_layers[i];
  const int64_t pages = config_.num_pages, page_size = config_.page_size;
  const auto dims = {pages, page_size, s.num_kv_heads, s.row_elems()};
  KvView view;
  view.k = Tensor(page_parts_[2 * i].base, s.dtype, dims);
  view.v = Tensor(page_parts_[2 * i + 1].base, s.dtype, dims);
  view.dtype = s.dtype;
  if (s.scale_groups() > 0) {
    const size_t scales = 2 * spec_.kv_layers.size() + 2 * i;
    const auto scale_dims = {pages, page_size, s.num_kv_heads, s.scale_groups()};
    view.k_scales = Tensor(page_parts_[scales].base, kv_scale_dtype(s.dtype), scale_dims);
    view.v_scales = Tensor(page_parts_[scales + 1].base, kv_scale_dtype(s.dtype), scale_dims);
  }
  return view;
}

CacheStore::StateView CacheStore::state_view(int32_t layer) const {
  check_index(layer, static_cast<int32_t>(spec_.layer_kinds.size()), "cache layer");
  SYV_CHECK(spec_.layer_kinds[static_cast<size_t>(layer)] == LayerCacheKind::kRecurrentState)
      << "layer " << layer << " has KV pages, not recurrent state";
  const size_t i = static_cast<size_t>(index_[static_cast<size_t>(layer)]);
  const StateLayerShape& s = spec_.state_layers[i];
  const int64_t n = config_.num_state_slots;
  StateView view{Tensor(slots_[i].conv.data(), DType::F32, {n, s.conv_rows, s.conv_channels}),
                 Tensor(slots_[i].ssm.data(), s.ssm_dtype, {n, s.heads, s.k_dim, s.v_dim}),
                 Tensor(), Tensor()};
  const int64_t c = config_.num_checkpoints;
  if (c > 0) {
    view.conv_checkpoints =
        Tensor(ckpt_[i].conv.data(), DType::F32, {c, s.conv_rows, s.conv_channels});
    view.ssm_checkpoints = Tensor(ckpt_[i].ssm.data(), s.ssm_dtype, {c, s.heads, s.k_dim, s.v_dim});
  }
  return view;
}

template <typename Fn>
void CacheStore::for_each_page_part(int32_t page_a, int32_t page_b, const Fn& fn) const {
  for (const PagePart& p : page_parts_)
    fn(p.base + page_a * p.bytes, p.base + page_b * p.bytes, static_cast<size_t>(p.bytes));
}

void CacheStore::copy_page(int32_t src, int32_t dst) {
  check_index(src, config_.num_pages, "page");
  check_index(dst, config_.num_pages, "page");
  if (src == dst) return;
  for_each_page_part(
      dst, src, [&](void* to, const void* from, size_t bytes) { backend_.copy(to, from, bytes); });
  for (CacheStore* m : mirrors_) m->copy_page(src, dst);
}

void CacheStore::reset_slot(int32_t slot) {
  check_index(slot, config_.num_state_slots, "state slot");
  for (size_t i = 0; i < slots_.size(); ++i) {
    const StateLayerShape& s = spec_.state_layers[i];
    backend_.fill_zero(at(slots_[i].conv, slot, s.conv_bytes()),
                       static_cast<size_t>(s.conv_bytes()));
    backend_.fill_zero(at(slots_[i].ssm, slot, s.ssm_bytes()), static_cast<size_t>(s.ssm_bytes()));
  }
  for (CacheStore* m : mirrors_) m->reset_slot(slot);
}

void CacheStore::copy_state(const std::vector<StateBuffers>& from, int32_t src,
                            const std::vector<StateBuffers>& to, int32_t dst) {
  for (size_t i = 0; i < from.size(); ++i) {
    const StateLayerShape& s = spec_.state_layers[i];
    backend_.copy(at(to[i].conv, dst, s.conv_bytes()), at(from[i].conv, src, s.conv_bytes()),
                  static_cast<size_t>(s.conv_bytes()));
    backend_.copy(at(to[i].ssm, dst, s.ssm_bytes()), at(from[i].ssm, src, s.ssm_bytes()),
                  static_cast<size_t>(s.ssm_bytes()));
  }
}

void CacheStore::copy_slot(int32_t src, int32_t dst) {
  check_index(src, config_.num_state_slots, "state slot");
  check_index(dst, config_.num_state_slots, "state slot");
  if (src != dst) copy_state(slots_, src, slots_, dst);
  for (CacheStore* m : mirrors_) m->copy_slot(src, dst);
}

void CacheStore::save_checkpoint(int32_t slot, int32_t checkpoint) {
  check_index(slot, config_.num_state_slots, "state slot");
  check_index(checkpoint, config_.num_checkpoints, "checkpoint");
  copy_state(slots_, slot, ckpt_, checkpoint);
  for (CacheStore* m : mirrors_) m->save_checkpoint(slot, checkpoint);
}

void CacheStore::load_checkpoint(int32_t checkpoint, int32_t slot) {
  check_index(slot, config_.num_state_slots, "state slot");
  check_index(checkpoint, config_.num_checkpoints, "checkpoint");
  copy_state(ckpt_, checkpoint, slots_, slot);
  for (CacheStore* m : mirrors_) m->load_checkpoint(checkpoint, slot);
}

void CacheStore::add_mirror(CacheStore& mirror) {
  SYV_CHECK(&mirror != this && mirror.spec_.layer_kinds == spec_.layer_kinds &&
            mirror.config_.num_pages == config_.num_pages &&
            mirror.config_.num_state_slots == config_.num_state_slots &&
            mirror.config_.num_checkpoints == config_.num_checkpoints)
      << "CacheStore::add_mirror: a mirror needs the same layers, pages, slots and checkpoints";
  mirrors_.push_back(&mirror);
}

int64_t CacheStore::external_page_bytes() const {
  int64_t bytes = page_bytes();
  for (const CacheStore* m : mirrors_) bytes += m->page_bytes();
  return bytes;
}
int64_t CacheStore::external_slot_bytes() const {
  int64_t bytes = slot_bytes();
  for (const CacheStore* m : mirrors_) bytes += m->slot_bytes();
  return bytes;
}

// The mirrors' parts of an external slot buffer, after this store's own: each mirror's
// copy(mirror, its part), waited for on the mirror's backend; returns `own`.
template <typename Copy>
CopyEvent CacheStore::with_mirrors(CopyEvent own, const void* external, const Copy& copy) {
  char* part = static_cast<char*>(const_cast<void*>(external)) + slot_bytes();
  for (CacheStore* m : mirrors_) {
    m->backend().wait_copy(copy(*m, part));
    part += m->slot_bytes();
  }
  return own;
}

CopyEvent CacheStore::copy_page_out(int32_t page, void* external) {
  const PageCopy one[] = {{page, external}};
  return copy_pages(one, CopyDir::kOut);
}
CopyEvent CacheStore::copy_page_in(const void* external, int32_t page) {
  const PageCopy one[] = {{page, const_cast<void*>(external)}};
  return copy_pages(one, CopyDir::kIn);
}
CopyEvent CacheStore::copy_pages_out(std::span<const PageCopy> pages) {
  return copy_pages(pages, CopyDir::kOut);
}
CopyEvent CacheStore::copy_pages_in(std::span<const PageCopy> pages) {
  return copy_pages(pages, CopyDir::kIn);
}
CopyEvent CacheStore::copy_pages_ahead(std::span<const PageCopy> pages) {
  return copy_pages(pages, CopyDir::kAhead);
}

// Every page's parts, in the external layout, as one batch; then each mirror's parts of the same
// externals (waited for on the mirror's backend, as with_mirrors() does for a slot).
CopyEvent CacheStore::copy_pages(std::span<const PageCopy> pages, CopyDir dir) {
  copy_ops_.clear();
  for (const PageCopy& pc : pages) {
    check_index(pc.page, config_.num_pages, "page");
    char* ext = static_cast<char*>(pc.external);
    for (const PageRun& run : page_runs_) {
      const PagePart& first = page_parts_[static_cast<size_t>(run.first)];
      char* dev = first.base + pc.page * first.bytes;
      const size_t bytes = static_cast<size_t>(first.bytes), rows = static_cast<size_t>(run.rows);
      const size_t pitch = static_cast<size_t>(run.pitch);
      copy_ops_.push_back(dir != CopyDir::kIn ? CopyOp{ext, dev, bytes, rows, bytes, pitch}
                                              : CopyOp{dev, ext, bytes, rows, pitch, bytes});
      ext += bytes * rows;
    }
  }
  CopyEvent own = pages.empty() ? CopyEvent() : backend_.copy_batch_async(copy_ops_, dir);
  if (mirrors_.empty() || pages.empty()) return own;
  std::vector<PageCopy> parts(pages.begin(), pages.end());
  int64_t offset = page_bytes();
  for (CacheStore* m : mirrors_) {
    for (size_t i = 0; i < pages.size(); ++i)
      parts[i].external = static_cast<char*>(pages[i].external) + offset;
    m->backend().wait_copy(m->copy_pages(parts, dir));
    offset += m->page_bytes();
  }
  return own;
}

CopyEvent CacheStore::copy_state_external(const std::vector<StateBuffers>& bufs, int32_t index,
                                          void* external, CopyDir dir) {
  char* ext = static_cast<char*>(external);
  copy_ops_.clear();
  for (size_t i = 0; i < bufs.size(); ++i) {
    const StateLayerShape& s = spec_.state_layers[i];
    char* conv = at(bufs[i].conv, index, s.conv_bytes());
    char* ssm = at(bufs[i].ssm, index, s.ssm_bytes());
    const size_t cb = static_cast<size_t>(s.conv_bytes()), sb = static_cast<size_t>(s.ssm_bytes());
    if (dir == CopyDir::kOut) {
      copy_ops_.push_back({ext, conv, cb});
      copy_ops_.push_back({ext + cb, ssm, sb});
    } else {
      copy_ops_.push_back({conv, ext, cb});
      copy_ops_.push_back({ssm, ext + cb, sb});
    }
    ext += cb + sb;
  }
  return backend_.copy_batch_async(copy_ops_, dir);
}

CopyEvent CacheStore::copy_slot_out(int32_t slot, void* external) {
  check_index(slot, config_.num_state_slots, "state slot");
  return with_mirrors(copy_state_external(slots_, slot, external, CopyDir::kOut), external,
                      [slot](CacheStore& m, char* part) { return m.copy_slot_out(slot, part); });
}
CopyEvent CacheStore::copy_slot_in(const void* external, int32_t slot) {
  check_index(slot, config_.num_state_slots, "state slot");
  return with_mirrors(copy_state_external(slots_, slot, const_cast<void*>(external), CopyDir::kIn),
                      external,
                      [slot](CacheStore& m, char* part) { return m.copy_slot_in(part, slot); });
}
CopyEvent CacheStore::copy_checkpoint_out(int32_t checkpoint, void* external) {
  check_index(checkpoint, config_.num_checkpoints, "checkpoint");
  return with_mirrors(
      copy_state_external(ckpt_, checkpoint, external, CopyDir::kOut), external,
      [checkpoint](CacheStore& m, char* part) { return m.copy_checkpoint_out(checkpoint, part); });
}
CopyEvent CacheStore::copy_checkpoint_in(const void* external, int32_t checkpoint) {
  check_index(checkpoint, config_.num_checkpoints, "checkpoint");
  return with_mirrors(
      copy_state_external(ckpt_, checkpoint, const_cast<void*>(external), CopyDir::kIn), external,
      [checkpoint](CacheStore& m, char* part) { return m.copy_checkpoint_in(part, checkpoint); });
}

std::string CacheStore::describe() const {
  std::ostringstream line;
  line << "cache store: " << config_.num_pages << " pages x " << config_.page_size << " tokens for "
       << spec_.kv_layers.size() << " attention layers (";
  if (!spec_.kv_layers.empty()) {
    const KvLayerShape& k = spec_.kv_layers.front();
    line << "KV " << dtype_name(k.dtype);
    if (k.scale_groups() > 0) {
      line << " + " << k.scale_groups() << " " << dtype_name(kv_scale_dtype(k.dtype))
           << " scale(s) per row";
    }
    line << ", ";
  }
  line << page_bytes() << " bytes/page)";
  if (!spec_.state_layers.empty()) {
    line << ", " << config_.num_state_slots << " state slots + " << config_.num_checkpoints
         << " checkpoints for " << spec_.state_layers.size() << " recurrent layers ("
         << slot_bytes() << " bytes each, delta-rule state "
         << dtype_name(spec_.state_layers.front().ssm_dtype) << ")";
  }
  line << ", " << total_bytes_ / 1e6 << " MB on " << backend_.name();
  return line.str();
}

}  // namespace syv
