#include "engine/spec_policy.h"

#include <algorithm>
#include <sstream>

namespace syv {

double SpecPolicy::expected_tokens(double a, int32_t k) {
  double sum = 0, term = 1;
  for (int32_t i = 0; i <= k; ++i, term *= a) sum += term;
  return sum;
}

double SpecPolicy::cost(int32_t k, int32_t batch) const {
  const double b = std::max(1, batch);
  return 1.0 + k * (b / (b + o_.knee) + o_.draft_cost);
}

int32_t SpecPolicy::best_drafts(double a, int32_t room, int32_t batch) const {
  if (o_.disable_batch_size > 0 && batch >= o_.disable_batch_size) return 0;
  int32_t best = 0;
  double best_ratio = 1.0 + o_.margin;  // plain decoding, plus the margin drafts must beat
  for (int32_t k = 1; k <= std::min(room, o_.k); ++k) {
    const double ratio = expected_tokens(a, k) / cost(k, batch);
    if (ratio > best_ratio) {
      best_ratio = ratio;
      best = k;
    }
  }
  return best;
}

bool SpecPolicy::lone_draft_pays(int32_t room, int32_t batch, double uneven_cost) const {
  const double b = std::max(1, batch);
  for (int32_t k = 1; k <= std::min(room, o_.k); ++k) {
    // step_ratio() of one plan {a = 1, k drafts} among b - 1 plans without drafts.
    const double cost =
        1.0 + k * (1.0 / (b + o_.knee) + o_.draft_cost / b) + (batch > 1 ? uneven_cost : 0.0);
    if ((b + k) / b / cost > 1.0) return true;
  }
  return false;
}

SpecDecision SpecPolicy::decide(SpecState& state, int32_t room, int32_t batch, bool probe_step,
                                double uneven_cost) const {
  SpecDecision d;
  d.drafts = best_drafts(acceptance(state), room, batch);
  if (d.drafts > 0) {
    state.idle_steps = 0;
    return d;
  }
  d.skipped = true;
  ++state.idle_steps;
  // Probe only where better acceptance could turn drafting back on at this batch.
  if (o_.probe_interval > 0 && state.idle_steps >= o_.probe_interval && probe_step &&
      best_drafts(1.0, room, batch) > 0 && lone_draft_pays(room, batch, uneven_cost)) {
    state.idle_steps = 0;
    d.drafts = 1;
    d.probe = true;
    d.skipped = false;
  }
  return d;
}

double SpecPolicy::step_ratio(const SpecPlan* plans, int32_t n, double uneven_cost) const {
  if (n <= 0) return 1.0;
  double tokens = 0;
  int64_t rows = 0;
  bool uneven = false;
  for (int32_t i = 0; i < n; ++i) {
    tokens += expected_tokens(plans[i].acceptance, plans[i].drafts);
    rows += plans[i].drafts;
    uneven = uneven || plans[i].drafts != plans[0].drafts;
  }
  const double b = n;
  const double cost = 1.0 + static_cast<double>(rows) * (1.0 / (b + o_.knee) + o_.draft_cost / b) +
                      (uneven ? uneven_cost : 0.0);
  return tokens / b / cost;
}

bool SpecPolicy::step_pays(const SpecPlan* plans, int32_t n, double uneven_cost) const {
  for (int32_t i = 0; i < n; ++i) {
    if (plans[i].drafts > 0) return step_ratio(plans, n, uneven_cost) > 1.0;
  }
  return true;
}

void SpecPolicy::observe(SpecState& state, int32_t drafted, int32_t accepted) const {
  if (drafted <= 0) return;
  double a = acceptance(state);
  // Positions 0..accepted-1 were kept; position `accepted` (when it was a draft) was rejected.
  for (int32_t i = 0; i < accepted; ++i) a += o_.decay * (1.0 - a);
  if (accepted < drafted) a -= o_.decay * a;
  state.acceptance = a;
}

std::string SpecPolicy::describe() const {
  std::ostringstream s;
  s << "adaptive (cost of k drafts at B sequences = 1 + k * (B / (B + " << o_.knee << ") + "
    << o_.draft_cost << "), acceptance prior " << o_.prior << " decay " << o_.decay << ", margin "
    << o_.margin << ", probe every " << o_.probe_interval << " steps";
  if (o_.disable_batch_size > 0) s << ", off at " << o_.disable_batch_size << "+ sequences";
  // Where drafting stops paying even when every draft is kept.
  int32_t limit = 0;
  for (int32_t b = 1; b <= 4096 && best_drafts(1.0, o_.k, b) > 0; ++b) limit = b;
  if (limit == 0) {
    s << "; drafts never pay by this model, even all accepted)";
  } else {
    s << "; drafts pay up to " << limit << (limit == 4096 ? "+" : "") << " sequences)";
  }
  return s.str();
}

}  // namespace syv
