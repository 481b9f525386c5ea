#include "engine/scheduler.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"

namespace syv {

Scheduler::Scheduler(PrefixCache& cache, SchedulerConfig config) : cache_(cache), config_(config) {
  SYV_CHECK(config_.max_num_seqs > 0) << "max_num_seqs " << config_.max_num_seqs;
  SYV_CHECK(config_.max_num_batched_tokens > 0)
      << "max_num_batched_tokens " << config_.max_num_batched_tokens;
  running_.reserve(static_cast<size_t>(config_.max_num_seqs));
}

void Scheduler::add(Sequence* seq) {
  SYV_CHECK(seq->state == SequenceState::kWaiting && seq->pages.empty()) << "seq " << seq->id();
  waiting_.push_back(seq);
}

int32_t Scheduler::chunk_for(const Sequence& seq, int32_t budget) const {
  int32_t n = std::min(seq.num_pending(), budget);
  if (config_.max_prefill_chunk > 0) n = std::min(n, config_.max_prefill_chunk);
  return n;
}

void Scheduler::plan_saves(SchedulerOutput& out) {
  if (hybrid_ == nullptr) return;
  const ScheduledSeq& s = out.seqs.back();
  const int32_t begin = s.seq->num_computed;
  saves_.clear();
  hybrid_->plan_saves(
      s.seq, begin, begin + s.num_pending(),
      [&](int32_t length) { return prefix_key(*s.seq, length); }, saves_);
  const int32_t index = static_cast<int32_t>(out.seqs.size()) - 1;
  for (const HybridState::Save& v : saves_)
    out.state_saves.push_back({index, v.after, v.checkpoint});
}

uint64_t Scheduler::prefix_key(const Sequence& seq, int32_t length) const {
  const int32_t page = page_size();
  SYV_CHECK(length > 0 && length % page == 0) << "prefix_key of " << length << " tokens";
  const size_t pages = static_cast<size_t>(length / page);
  const size_t have = std::min(seq.page_keys.size(), pages);
  uint64_t key = have == 0 ? PrefixIndex::root_key() : seq.page_keys[have - 1];
  const int32_t key_tokens = page + cache_.lookahead();
  for (size_t i = have; i < pages; ++i) {
    SYV_CHECK_LE(static_cast<int32_t>(i) * page + key_tokens, seq.length())
        << "seq " << seq.id() << ": key of page " << i << " before its lookahead token";
    key = PrefixIndex::page_key(key, &seq.tokens[i * static_cast<size_t>(page)], key_tokens);
  }
  return key;
}

int32_t Scheduler::cut_for_prompt_rows(const Sequence& seq, int32_t n, int32_t rows_left) {
  if (!seq.wants_prompt_logprobs()) return n;
  // Positions before prompt_logprobs_next - 1 were reported (a recompute after preemption) and
  // need no row.
  const int32_t free = std::max(0, seq.prompt_logprobs_next - 1 - seq.num_computed);
  return std::min(n, free + rows_left);
}

void Scheduler::take_prompt_rows(ScheduledSeq& s, int32_t& rows_left) {
  const Sequence& seq = *s.seq;
  if (!seq.wants_prompt_logprobs()) return;
  const int32_t from = std::max(seq.num_computed, seq.prompt_logprobs_next - 1);
  const int32_t to = std::min(seq.num_computed + s.num_pending(), seq.prompt_len() - 1);
  if (to <= from) return;
  s.prompt_rows_from = from;
  s.num_prompt_rows = to - from;
  rows_left -= s.num_prompt_rows;
  SYV_CHECK_GE(rows_left, 0) << "seq " << seq.id() << ": prompt rows beyond the step's share";
}

bool Scheduler::grow(Sequence* seq, int32_t num_tokens) {
  const int32_t need = pages_for(num_tokens) - static_cast<int32_t>(seq->pages.size());
  if (need <= 0) return true;
  if (need > cache_.pool().num_available()) return false;
  for (int32_t i = 0; i < need; ++i) {
    const int32_t page = cache_.pool().allocate();
    SYV_CHECK(page >= 0) << "pool reported pages available";
    seq->pages.push_back(page);
  }
  return true;
}

InflightLoads* Scheduler::loads() const {
  HostTier* host = cache_.host_tier();
  return host != nullptr ? &host->loads() : nullptr;
}

void Scheduler::settle_loads() {
  InflightLoads* in_flight = loads();
  if (in_flight == nullptr) return;
  in_flight->poll();
  for (Sequence* seq : running_) {
    if (seq->state != SequenceState::kLoading || !in_flight->settled(seq->load)) continue;
    in_flight->order_after(seq->load);  // complete already: free, and the contract stays explicit
    seq->load = LoadTicket{};
    seq->state = SequenceState::kPrefilling;
  }
}

void Scheduler::stop_loading(Sequence* seq) {
  if (seq->state != SequenceState::kLoading) return;
  // The copy may still write its pages and slot: every op enqueued from now on (whoever's, once
  // they are reused) runs after it.
  loads()->order_after(seq->load);
  seq->load = LoadTicket{};
}

void Scheduler::release_pages(Sequence* seq) {
  // Tail first: the LRU then evicts a prefix's tail before its head.
  for (auto it = seq->pages.rbegin(); it != seq->pages.rend(); ++it) cache_.pool().release(*it);
  seq->pages.clear();
  seq->page_keys.clear();
  seq->num_computed = 0;
}

void Scheduler::remove_running(Sequence* seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  SYV_CHECK(it != running_.end()) << "seq " << seq->id() << " not running";
  running_.erase(it);
}

void Scheduler::preempt(Sequence* seq) {
  remove_running(seq);
  stop_loading(seq);
  seq->drafts.clear();
  // Its registered pages, kept in the host tier until it resumes (kv/host_tier.h "Kept for
  // preempted sequences"; a running sequence wants none: check_integrity()).
  if (HostTier* host = cache_.host_tier(); host != nullptr) {
    seq->wanted_host_keys = seq->page_keys;
    host->want_pages(seq->wanted_host_keys);
  }
  release_pages(seq);
  if (hybrid_ != nullptr) hybrid_->preempt(seq);
  seq->state = SequenceState::kWaiting;
  waiting_.push_front(seq);
}

bool Scheduler::waits_for_parent(const Sequence& seq) const {
  const Sequence* parent = seq.parent();
  if (parent == nullptr || seq.admitted_once || parent->is_done()) return false;
  const int32_t share_len = (seq.prompt_len() - 1) / page_size() * page_size();
  return parent->num_computed < share_len;
}

PrefixHit Scheduler::lookup(const Sequence& seq) const {
  // Positions taken from the cache would have no logits to report.
  if (seq.wants_prompt_logprobs()) return PrefixHit{};
  // The last token is always fed again: its logits give the next token.
  PrefixHit hit = cache_.match(seq.tokens.data(), seq.length() - 1);
  const Sequence* parent = seq.parent();
  if (parent != nullptr && !parent->is_done()) {
    // n > 1: share sample 0's full prompt pages even when prefix caching is off.
    const int32_t share_pages = (seq.prompt_len() - 1) / page_size();
    const int32_t have =
        std::min<int32_t>(static_cast<int32_t>(parent->page_keys.size()), share_pages);
    if (have * page_size() > hit.length) {
      hit.host_pages.clear();
      hit.pages.assign(parent->pages.begin(), parent->pages.begin() + have);
      hit.keys.assign(parent->page_keys.begin(), parent->page_keys.begin() + have);
      hit.length = have * page_size();
    }
  }
  return hit;
}

void Scheduler::schedule(SchedulerOutput& out) {
  out.seqs.clear();
  out.num_tokens = 0;
  out.num_padding = 0;
  out.num_preempted = 0;
  out.prefix_query_tokens = out.prefix_hit_tokens = out.prompt_tokens = 0;
  out.prefix_host_hit_tokens = 0;
  out.state_saves.clear();
  int32_t budget = config_.max_num_batched_tokens;
  int32_t prompt_rows_left = config_.max_prompt_logprob_rows;
  settle_loads();  // loading sequences whose load landed are scheduled from this step on

  // 1. Running sequences, oldest first, but those still loading; preempt the youngest when pages
  //    run out. A prefill chunk leaves room in the budget for the decode tokens of the sequences
  //    after it.
  auto loading = [](const Sequence* seq) { return seq->state == SequenceState::kLoading; };
  int32_t decodes_left = 0;
  for (const Sequence* seq : running_) decodes_left += !loading(seq) && seq->num_pending() == 1;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (loading(seq)) {  // holds its pages and slot, takes no budget
      ++i;
      continue;
    }
    const bool decoding = seq->num_pending() == 1;
    if (decoding) --decodes_left;
    const int32_t n = cut_for_prompt_rows(
        *seq, chunk_for(*seq, decoding ? budget : budget - decodes_left), prompt_rows_left);
    if (n <= 0) {  // a prefill that must wait for the decodes behind it (or for logits rows)
      ++i;
      continue;
    }
    const int32_t drafts = drafts_for(*seq, n, budget - n - decodes_left);
    bool preempted_self = false;
    while (!grow(seq, seq->num_computed + n)) {
      Sequence* victim = running_.back();
      if (victim != seq && !loading(victim) && victim->num_pending() == 1) --decodes_left;
      preempt(victim);
      ++out.num_preempted;
      if (victim == seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    ScheduledSeq scheduled{seq, n, seq->num_computed + n == seq->length()};
    take_prompt_rows(scheduled, prompt_rows_left);
    // Drafts take pages only when the pool has them: nothing is preempted for a guess.
    if (drafts > 0 && grow(seq, seq->num_computed + n + drafts)) {
      scheduled.num_new_tokens += drafts;
      scheduled.num_drafts = drafts;
    }
    out.seqs.push_back(scheduled);
    plan_saves(out);
    if (hybrid_ != nullptr && scheduled.num_drafts > 0) {  // the states a rejection returns to
      saves_.clear();
      hybrid_->plan_verify_saves(*seq, n, scheduled.num_drafts, saves_);
      const int32_t index = static_cast<int32_t>(out.seqs.size()) - 1;
      for (const HybridState::Save& v : saves_)
        out.state_saves.push_back({index, v.after, v.checkpoint});
    }
    out.num_tokens += scheduled.num_new_tokens;
    budget -= scheduled.num_new_tokens;
    ++i;
  }

  // 2. Admit waiting sequences (not in a step that had to preempt: the pool is tight).
  deferred_.reset();
  while (out.num_preempted == 0 && !waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    std::optional<PrefixHit> hit = admissible_hit(*seq);
    if (!hit) break;
    if (config_.admit_loads_after_launch && loads_from_host(*hit)) {
      deferred_ = DeferredAdmission{seq, std::move(*hit), budget, prompt_rows_left};
      break;
    }
    if (!admit(seq, *hit, out, budget, prompt_rows_left, /*may_run=*/true)) break;
  }
}

void Scheduler::admit_after_launch(SchedulerOutput& out) {
  if (!deferred_) return;
  DeferredAdmission d = std::move(*deferred_);
  deferred_.reset();
  SYV_CHECK(!waiting_.empty() && waiting_.front() == d.seq)
      << "the admission deferred by schedule() is no longer the first waiting sequence";
  // The front's hit as schedule() found it (nothing changed the caches since: the step was only
  // launched); then the waiting sequences behind it while each one's hit loads from the host tier.
  std::optional<PrefixHit> hit = std::move(d.hit);
  while (hit && static_cast<int32_t>(running_.size()) < config_.max_num_seqs &&
         admit(waiting_.front(), *hit, out, d.budget, d.rows_left, /*may_run=*/false) &&
         !waiting_.empty()) {
    hit = admissible_hit(*waiting_.front());
    if (hit && !loads_from_host(*hit)) break;  // it would run: from the next step on
  }
}

bool Scheduler::loads_from_host(const PrefixHit& hit) {
  return !hit.host_pages.empty() || hit.host_checkpoint >= 0;
}

std::optional<PrefixHit> Scheduler::admissible_hit(Sequence& seq) const {
  if (waits_for_parent(seq)) return std::nullopt;
  PrefixHit hit = lookup(seq);
  if (hybrid_ != nullptr) {
    if (!hybrid_->has_free_slot()) return std::nullopt;
    hybrid_->trim_hit(&seq, hit);  // a hit needs a checkpoint at its end
  }
  return hit;
}

bool Scheduler::admit(Sequence* seq, const PrefixHit& hit, SchedulerOutput& out, int32_t& budget,
                      int32_t& rows_left, bool may_run) {
  const int32_t after_hit = seq->length() - hit.length;
  int32_t n = std::min(after_hit, budget);
  if (config_.max_prefill_chunk > 0) n = std::min(n, config_.max_prefill_chunk);
  if (seq->wants_prompt_logprobs()) {  // no hit: the chunk starts at its first token
    n = std::min(n, std::max(0, seq->prompt_logprobs_next - 1) + rows_left);
    if (n <= 0) return false;
  }
  // Host-tier pages of the hit need device pages too (they are copied in below).
  const int32_t need = pages_for(hit.length + n) - static_cast<int32_t>(hit.pages.size());
  if (need > cache_.pool().num_available() - cache_.num_evictable(hit)) return false;
  cache_.acquire(hit);     // retains the device pages, pins the host entries
  unwant_host_pages(seq);  // what it gets back is pinned now, the rest is computed
  seq->pages = hit.pages;
  seq->page_keys = hit.keys;
  seq->num_computed = hit.length;
  // The pages this allocation evicts go to this sequence alone: when it loads, its loads (not
  // the compute stream) wait for their write-backs (kv/host_tier.h "Copies" 6).
  HostTier* host = cache_.host_tier();
  if (host != nullptr) host->begin_admission();
  SYV_CHECK(grow(seq, seq->num_computed + n)) << "admission check passed but pages ran out";
  if (host != nullptr) host->order_loads_after_admission();
  // The newest load still writing what the sequence reads: device pages it matched (another
  // sequence's load, registered before it lands), then its own host pages and checkpoint.
  const InflightLoads* in_flight = loads();
  LoadTicket load = in_flight != nullptr ? in_flight->newest_into(hit.pages) : LoadTicket{};
  LoadTicket own = cache_.load_host_pages(hit, seq->pages, seq->tokens.data());
  if (hybrid_ != nullptr) own = InflightLoads::newer(own, hybrid_->admit(seq, hit));
  if (host != nullptr) host->end_admission(own.pending());
  load = InflightLoads::newer(load, own);
  if (!seq->admitted_once) {
    seq->admitted_once = true;
    seq->cached_tokens = hit.length;
  }
  if (seq->sample_index() == 0 && !seq->counted_prompt) {  // a request's prompt counts once
    seq->counted_prompt = true;
    out.prompt_tokens += seq->prompt_len();
    out.prefix_query_tokens += seq->prompt_len();
    out.prefix_hit_tokens += hit.length;
    out.prefix_host_hit_tokens += static_cast<int64_t>(hit.host_pages.size()) * page_size();
  }
  waiting_.pop_front();
  running_.push_back(seq);
  if (load.pending()) {  // not scheduled (nor counted in the budget) until the load settles
    seq->state = SequenceState::kLoading;
    seq->load = std::move(load);
    return true;
  }
  seq->state = SequenceState::kPrefilling;
  if (!may_run) return true;  // after the launch, its load synchronous: runs from the next step
  ScheduledSeq scheduled{seq, n, seq->num_computed + n == seq->length()};
  take_prompt_rows(scheduled, rows_left);
  out.seqs.push_back(scheduled);
  plan_saves(out);
  out.num_tokens += n;
  budget -= n;
  return true;
}

int32_t Scheduler::drafts_for(const Sequence& seq, int32_t n, int32_t room) const {
  if (seq.drafts.empty() || seq.state != SequenceState::kDecoding || n != seq.num_pending())
    return 0;
  int32_t k = std::min(static_cast<int32_t>(seq.drafts.size()), room);
  if (k <= 0) return 0;
  if (hybrid_ != nullptr) {
    k = std::min(k, hybrid_->verify_entries());
    if (k <= 0) return 0;
    // A checkpoint boundary inside the drafts would go unsaved: stop the drafts there.
    k = hybrid_->snap_chunk(seq, seq.num_computed, n + k) - n;
  }
  return std::max(k, 0);
}

bool Scheduler::pad_verify(SchedulerOutput& out, int32_t q) {
  SYV_CHECK(q >= 2 && out.num_padding == 0) << "pad_verify: q " << q << ", padded already";
  int32_t need = 0;
  for (const ScheduledSeq& s : out.seqs) {
    SYV_CHECK(s.num_pending() == 1 && s.wants_logits && s.num_new_tokens <= q)
        << "pad_verify: seq " << s.seq->id() << " feeds " << s.num_new_tokens << " tokens, q " << q;
    need +=
        std::max(0, pages_for(s.seq->num_computed + q) - static_cast<int32_t>(s.seq->pages.size()));
  }
  // Free pages only: padding evicts no cached prefix (the step's cost stays inside the step).
  if (need > cache_.pool().num_free()) return false;
  if (hybrid_ != nullptr) out.state_saves.clear();
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    ScheduledSeq& s = out.seqs[i];
    SYV_CHECK(grow(s.seq, s.seq->num_computed + q)) << "pad_verify: free pages ran out";
    s.num_padding = q - s.num_new_tokens;
    out.num_padding += s.num_padding;
    out.num_tokens += s.num_padding;
    if (hybrid_ != nullptr) {  // the states after pending + a tokens, a = 0 .. q - 2
      saves_.clear();
      hybrid_->plan_verify_saves(*s.seq, s.num_pending(), q - 1, saves_);
      for (const HybridState::Save& v : saves_)
        out.state_saves.push_back({static_cast<int32_t>(i), v.after, v.checkpoint});
    }
  }
  return true;
}

void Scheduler::commit(const SchedulerOutput& out) {
  const int32_t page = page_size();
  if (hybrid_ != nullptr) hybrid_->end_step();  // the forward wrote the in-pass saves
  for (const ScheduledSeq& s : out.seqs) {
    Sequence* seq = s.seq;
    SYV_CHECK(s.num_accepted >= 0 && s.num_accepted <= s.num_drafts)
        << "seq " << seq->id() << ": " << s.num_accepted << " of " << s.num_drafts
        << " drafts accepted";
    const int32_t advance = s.num_pending() + s.num_accepted;
    // The state went past a rejected draft or a filler position.
    if (hybrid_ != nullptr && s.num_accepted < s.num_drafts + s.num_padding)
      hybrid_->accept_verified(*seq, s.num_accepted);
    seq->drafts.clear();
    if (s.num_prompt_rows > 0)
      seq->prompt_logprobs_next = s.prompt_rows_from + s.num_prompt_rows + 1;
    seq->num_computed += advance;
    SYV_CHECK_LE(seq->num_computed, seq->length()) << "seq " << seq->id();
    // Pages mapped for drafts that were rejected.
    while (static_cast<int32_t>(seq->pages.size()) > pages_for(seq->length())) {
      cache_.pool().release(seq->pages.back());
      seq->pages.pop_back();
    }
    const size_t full = static_cast<size_t>(seq->num_computed / page);
    while (seq->page_keys.size() < full) {
      const size_t idx = seq->page_keys.size();
      // A key covers the lookahead tokens after its page too (prefix_index.h): the sampled or
      // next prompt token always follows the computed ones.
      SYV_CHECK_LE(static_cast<int32_t>(idx + 1) * page + cache_.lookahead(), seq->length())
          << "seq " << seq->id() << ": page " << idx << " registered before its lookahead token";
      const uint64_t parent = idx == 0 ? PrefixIndex::root_key() : seq->page_keys[idx - 1];
      seq->page_keys.push_back(cache_.insert(parent, &seq->tokens[idx * page], seq->pages[idx]));
    }
    if (hybrid_ != nullptr && advance > 0) hybrid_->after_step(seq);
    if (s.wants_logits) seq->state = SequenceState::kDecoding;
  }
}

void Scheduler::unwant_host_pages(Sequence* seq) {
  if (seq->wanted_host_keys.empty()) return;
  cache_.host_tier()->unwant_pages(seq->wanted_host_keys);
  seq->wanted_host_keys.clear();
}

void Scheduler::finish(Sequence* seq) {
  if (seq->is_done()) return;
  unwant_host_pages(seq);
  if (seq->state == SequenceState::kWaiting) {
    auto it = std::find(waiting_.begin(), waiting_.end(), seq);
    if (it != waiting_.end()) waiting_.erase(it);
  } else {
    remove_running(seq);
    stop_loading(seq);
  }
  release_pages(seq);
  if (hybrid_ != nullptr) hybrid_->finish(seq);
  seq->state = SequenceState::kFinished;
}

void Scheduler::abort(Sequence* seq) {
  if (seq->is_done()) return;
  finish(seq);
  seq->state = SequenceState::kAborted;
}

std::string Scheduler::check_integrity() const {
  std::string err = cache_.check_integrity();
  if (!err.empty()) return err;
  if (hybrid_ != nullptr) {
    err = hybrid_->check_integrity(running_, waiting_);
    if (!err.empty()) return err;
  }
  std::ostringstream out;
  const PagePool& pool = cache_.pool();
  std::vector<int32_t> refs(static_cast<size_t>(pool.num_pages()), 0);
  if (static_cast<int32_t>(running_.size()) > config_.max_num_seqs)
    out << running_.size() << " running > max_num_seqs " << config_.max_num_seqs << "; ";
  for (const Sequence* seq : running_) {
    if (seq->state != SequenceState::kLoading && seq->state != SequenceState::kPrefilling &&
        seq->state != SequenceState::kDecoding)
      out << "running seq " << seq->id() << " in state " << to_string(seq->state) << "; ";
    if (!seq->wanted_host_keys.empty())
      out << "running seq " << seq->id() << " still wants " << seq->wanted_host_keys.size()
          << " host pages kept; ";
    if ((seq->state == SequenceState::kLoading) != seq->load.pending())
      out << "seq " << seq->id() << " " << to_string(seq->state) << " with load " << seq->load.id
          << "; ";
    const int32_t pages = static_cast<int32_t>(seq->pages.size());
    if (pages < pages_for(seq->num_computed) || pages > pages_for(seq->length()))
      out << "seq " << seq->id() << " holds " << pages << " pages for " << seq->num_computed
          << " computed of " << seq->length() << " tokens; ";
    if (static_cast<int32_t>(seq->page_keys.size()) > seq->num_computed / page_size())
      out << "seq " << seq->id() << " has " << seq->page_keys.size() << " chain keys for "
          << seq->num_computed << " computed tokens; ";
    if (seq->num_pending() < 1) out << "running seq " << seq->id() << " has nothing pending; ";
    for (int32_t p : seq->pages) {
      if (p < 0 || p >= pool.num_pages())
        out << "seq " << seq->id() << " maps bad page " << p << "; ";
      else
        ++refs[static_cast<size_t>(p)];
    }
  }
  out << check_loads();
  for (const Sequence* seq : waiting_) {
    if (seq->state != SequenceState::kWaiting || !seq->pages.empty() || seq->num_computed != 0 ||
        seq->load.pending())
      out << "waiting seq " << seq->id() << " state " << to_string(seq->state) << " holds "
          << seq->pages.size() << " pages, " << seq->num_computed << " computed; ";
  }
  for (int32_t p = 0; p < pool.num_pages(); ++p) {
    if (refs[static_cast<size_t>(p)] != pool.refcount(p)) {
      out << "page " << p << " refcount " << pool.refcount(p) << " but mapped by "
          << refs[static_cast<size_t>(p)] << " sequences; ";
      break;
    }
  }
  return out.str();
}

std::string Scheduler::check_loads() const {
  const InflightLoads* in_flight = loads();
  if (in_flight == nullptr) return "";
  // Every page and slot a load may still write is held by a loading sequence that waits for it.
  std::ostringstream out;
  auto waited_for = [&](int32_t page, int32_t slot, uint64_t id) {
    for (const Sequence* seq : running_) {
      if (seq->state != SequenceState::kLoading || seq->load.id < id) continue;
      if (slot >= 0 ? seq->state_slot == slot
                    : std::find(seq->pages.begin(), seq->pages.end(), page) != seq->pages.end())
        return true;
    }
    return false;
  };
  for (const auto& [page, id] : in_flight->page_loads())
    if (!waited_for(page, -1, id))
      out << "page " << page << " in flight (load " << id << ") held by no sequence loading it; ";
  for (const auto& [slot, id] : in_flight->slot_loads())
    if (!waited_for(-1, slot, id))
      out << "state slot " << slot << " in flight (load " << id
          << ") held by no sequence loading it; ";
  return out.str();
}

}  // namespace syv
