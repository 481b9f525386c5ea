#include "engine/hybrid_state.h"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "backend/memory_plan.h"
#include "core/check.h"
#include "engine/sequence.h"
#include "kv/cache_store.h"
#include "kv/host_tier.h"

namespace syv {

HybridState::HybridState(CacheStore& store, CheckpointGeometry geometry, RetentionPolicy policy,
                         int32_t num_slots, int32_t num_checkpoints, int32_t verify_entries)
    : store_(store),
      geometry_(geometry),
      policy_(policy),
      pool_(num_slots, num_checkpoints),
      verify_entries_(verify_entries) {}

void HybridState::set_host_tier(HostTier* host) {
  host_ = host;
  if (host_ == nullptr || host_->num_checkpoints() == 0) return;
  pool_.set_evict_callback([this](int32_t id, uint64_t key, int32_t length) {
    host_->store_checkpoint(id, key, length);  // write-back, before the entry is refilled
  });
}

void HybridState::plan_verify_saves(const Sequence& seq, int32_t pending, int32_t drafts,
                                    std::vector<Save>& saves) const {
  SYV_CHECK(seq.state_slot >= 0 && pending >= 1 && drafts >= 1 && drafts <= verify_entries_)
      << "seq " << seq.id() << " slot " << seq.state_slot << ": verify of " << pending << " + "
      << drafts << " tokens with " << verify_entries_ << " entries per slot";
  const int32_t first = pool_.num_checkpoints() + seq.state_slot * verify_entries_;
  for (int32_t a = 0; a < drafts; ++a) saves.push_back({pending + a, first + a});
}

void HybridState::accept_verified(const Sequence& seq, int32_t accepted) {
  SYV_CHECK(seq.state_slot >= 0 && accepted >= 0 && accepted < verify_entries_)
      << "seq " << seq.id() << " slot " << seq.state_slot << ", " << accepted << " accepted";
  store_.load_checkpoint(pool_.num_checkpoints() + seq.state_slot * verify_entries_ + accepted,
                         seq.state_slot);
}

bool HybridState::is_boundary(const Sequence& seq, int32_t length) const {
  return geometry_.is_boundary(length, seq.prompt_len()) ||
         (length > 0 && length == seq.shared_boundary);
}

void HybridState::trim_hit(Sequence* seq, PrefixHit& hit) const {
  const int32_t page = geometry_.page_size();
  const int32_t pages_end = hit.length;
  int32_t keep = hit.num_pages();
  hit.checkpoint = hit.host_checkpoint = -1;
  for (; keep > 0; --keep) {
    const uint64_t key = hit.keys[static_cast<size_t>(keep - 1)];
    hit.checkpoint = pool_.find(key, keep * page);
    if (std::find(pending_.begin(), pending_.end(), hit.checkpoint) != pending_.end())
      hit.checkpoint = -1;  // written by this step's forward, after any load enqueued now
    if (hit.checkpoint < 0 && host_ != nullptr)
      hit.host_checkpoint = host_->find_checkpoint(key, keep * page);
    if (hit.checkpoint >= 0 || hit.host_checkpoint >= 0) break;
  }
  const size_t on_device = std::min(hit.pages.size(), static_cast<size_t>(keep));
  hit.pages.resize(on_device);
  hit.host_pages.resize(static_cast<size_t>(keep) - on_device);
  hit.keys.resize(static_cast<size_t>(keep));
  hit.length = keep * page;
  if (pages_end > hit.length && seq->shared_boundary == 0) seq->shared_boundary = pages_end;
}

int32_t HybridState::snap_chunk(const Sequence& seq, int32_t begin, int32_t n) const {
  const int32_t end = geometry_.snap_chunk_end(begin, begin + n, seq.prompt_len());
  const int32_t shared = seq.shared_boundary;
  return (shared > begin && shared < end ? shared : end) - begin;
}

LoadTicket HybridState::admit(Sequence* seq, const PrefixHit& hit) {
  SYV_CHECK_EQ(seq->state_slot, -1) << "seq " << seq->id() << " admitted while holding a slot";
  const int32_t slot = pool_.allocate_slot();
  SYV_CHECK(slot >= 0) << "admission without a free state slot";
  seq->state_slot = slot;
  if (hit.length > 0 && hit.checkpoint < 0) {
    SYV_CHECK(host_ != nullptr && hit.host_checkpoint >= 0)
        << "seq " << seq->id() << " hit of " << hit.length << " tokens without its checkpoint";
    CopyEvent event = host_->load_checkpoint(hit.host_checkpoint, slot);
    host_->unpin_checkpoint(hit.host_checkpoint);
    ++counters_.checkpoints_loaded;
    ++counters_.checkpoints_from_host;
    return host_->loads().add(std::move(event), {}, slot, {}, hit.host_checkpoint);
  }
  if (hit.length > 0) {
    SYV_CHECK(pool_.length_of(hit.checkpoint) == hit.length)
        << "seq " << seq->id() << " hit of " << hit.length << " tokens without its checkpoint";
    store_.load_checkpoint(hit.checkpoint, slot);
    pool_.touch(hit.checkpoint);
    ++counters_.checkpoints_loaded;
  } else {
    store_.reset_slot(slot);
  }
  return LoadTicket{};
}

int32_t HybridState::hold(Sequence* seq, int32_t length, uint64_t key) {
  auto& holds = seq->checkpoints;
  auto pos = std::lower_bound(holds.begin(), holds.end(), length,
                              [](const CheckpointHold& h, int32_t l) { return h.length < l; });
  if (pos != holds.end() && pos->length == length) return -1;  // resumed after preemption
  bool fresh = false;
  const int32_t id = pool_.acquire(key, length, &fresh);
  if (id < 0) {
    ++counters_.checkpoints_skipped;
    return -1;
  }
  holds.insert(pos, CheckpointHold{length, id});
  if (!fresh) {
    ++counters_.checkpoints_shared;
    return -1;
  }
  ++counters_.checkpoints_saved;
  return id;
}

void HybridState::plan_saves(Sequence* seq, int32_t begin, int32_t end,
                             const std::function<uint64_t(int32_t)>& key_of,
                             std::vector<Save>& saves) {
  if (end - begin < 2) return;
  const int32_t prompt = seq->prompt_len();
  const int32_t interval = geometry_.interval();
  int32_t at[] = {geometry_.resend_boundary(prompt), geometry_.extension_boundary(prompt),
                  seq->shared_boundary, (end - 1) / interval * interval};
  // The memory plan counts the delta rule's chunk scratch for this many saves a chunk.
  static_assert(std::size(at) == kMaxBoundarySavesPerChunk);
  std::sort(std::begin(at), std::end(at));
  int32_t last = begin;
  for (int32_t b : at) {
    if (b <= last || b >= end) continue;
    last = b;
    SYV_CHECK(b % geometry_.page_size() == 0) << "seq " << seq->id() << " boundary " << b;
    const int32_t id = hold(seq, b, key_of(b));
    if (id < 0) continue;
    SYV_CHECK(seq->state_slot >= 0) << "seq " << seq->id() << " has no state slot";
    saves.push_back({b - begin, id});
    pending_.push_back(id);
  }
}

void HybridState::after_step(Sequence* seq) {
  const int32_t len = seq->num_computed;
  if (!is_boundary(*seq, len)) return;
  const size_t pages = static_cast<size_t>(len / geometry_.page_size());
  SYV_CHECK(seq->page_keys.size() >= pages) << "seq " << seq->id() << " at boundary " << len
                                            << " has " << seq->page_keys.size() << " chain keys";
  const int32_t id = hold(seq, len, seq->page_keys[pages - 1]);
  if (id < 0) return;
  SYV_CHECK(seq->state_slot >= 0) << "seq " << seq->id() << " has no state slot";
  store_.save_checkpoint(seq->state_slot, id);
}

void HybridState::preempt(Sequence* seq) {
  if (seq->state_slot >= 0) pool_.free_slot(seq->state_slot);
  seq->state_slot = -1;
}

void HybridState::finish(Sequence* seq) {
  preempt(seq);
  for (const CheckpointHold& h : seq->checkpoints)
    pool_.release(h.id, geometry_.keep(policy_, h.length, seq->prompt_len()) ||
                            h.length == seq->shared_boundary);
  seq->checkpoints.clear();
}

std::string HybridState::check_integrity(const std::vector<Sequence*>& running,
                                         const std::deque<Sequence*>& waiting) const {
  std::string err = pool_.check_integrity();
  if (!err.empty()) return "checkpoint pool: " + err;
  std::ostringstream out;
  std::unordered_set<int32_t> slots;
  std::unordered_map<int32_t, int32_t> holds;
  auto check_holds = [&](const Sequence* seq) {
    int32_t prev = 0;
    for (const CheckpointHold& h : seq->checkpoints) {
      if (h.length <= prev || !is_boundary(*seq, h.length))
        out << "seq " << seq->id() << " holds a checkpoint at " << h.length
            << " (not an increasing boundary); ";
      if (h.id < 0 || h.id >= pool_.num_checkpoints() || pool_.refcount(h.id) <= 0 ||
          pool_.length_of(h.id) != h.length) {
        out << "seq " << seq->id() << " holds checkpoint " << h.id << " at " << h.length
            << " that the pool does not hold there; ";
      } else {
        ++holds[h.id];
      }
      prev = h.length;
    }
  };
  for (const Sequence* seq : running) {
    if (seq->state_slot < 0 || seq->state_slot >= pool_.num_slots() ||
        !pool_.slot_in_use(seq->state_slot) || !slots.insert(seq->state_slot).second)
      out << "running seq " << seq->id() << " has bad or shared state slot " << seq->state_slot
          << "; ";
    check_holds(seq);
  }
  for (const Sequence* seq : waiting) {
    if (seq->state_slot != -1)
      out << "waiting seq " << seq->id() << " holds state slot " << seq->state_slot << "; ";
    check_holds(seq);
  }
  if (pool_.num_slots() - pool_.num_free_slots() != static_cast<int32_t>(slots.size()))
    out << pool_.num_slots() - pool_.num_free_slots() << " state slots in use for " << slots.size()
        << " running sequences; ";
  for (int32_t id = 0; id < pool_.num_checkpoints(); ++id) {
    auto it = holds.find(id);
    const int32_t n = it == holds.end() ? 0 : it->second;
    if (n != pool_.refcount(id)) {
      out << "checkpoint " << id << " refcount " << pool_.refcount(id) << " but held by " << n
          << " sequences; ";
      break;
    }
  }
  return out.str();
}

}  // namespace syv
