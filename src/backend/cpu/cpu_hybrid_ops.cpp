#include "backend/cpu/cpu_hybrid_ops.h"

#include "backend/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/thread_pool.h"

namespace syv::cpu {
namespace {

// Elements [begin, begin + n) as f32 (copied, whatever the dtype).
std::vector<float> load_range(const Tensor& t, int64_t begin, int64_t n) {
  SYV_CHECK_LE(begin + n, t.numel()) << "load_range";
  std::vector<float> v(static_cast<size_t>(n));
  if (t.dtype == DType::F32) {
    std::copy_n(t.as<const float>() + begin, n, v.data());
  } else {
    for (int64_t i = 0; i < n; ++i) v[i] = load_f32(t, begin + i);
  }
  return v;
}

// Elements [begin, begin + n) as f32: in place for f32 tensors, else converted into *tmp.
const float* f32_range(const Tensor& t, int64_t begin, int64_t n, std::vector<float>* tmp) {
  if (t.dtype == DType::F32) {
    SYV_CHECK_LE(begin + n, t.numel()) << "f32_range";
    return t.as<const float>() + begin;
  }
  *tmp = load_range(t, begin, n);
  return tmp->data();
}

inline float sigmoid(float x) {
  return 1.f / (1.f + std::exp(-x));
}
inline float silu(float x) {
  return x / (1.f + std::exp(-x));
}
// torch.nn.functional.softplus (beta 1, threshold 20).
inline float softplus(float x) {
  return x > 20.f ? x : std::log1p(std::exp(x));
}

void require_f32(const Tensor& t, const char* what) {
  SYV_CHECK(t.dtype == DType::F32) << what << " must be f32, found " << dtype_name(t.dtype);
}

struct SeqView {
  int32_t num_seqs = 0;
  const int32_t* starts = nullptr;  // [S + 1]
  const int32_t* slots = nullptr;   // [S]
  StateSaves saves;
};

// `save_to`: the op's checkpoint tensor (dim 0 = checkpoints), or empty when nothing is saved.
SeqView seqs_of(const BatchMeta& meta, int64_t num_tokens, int64_t num_slots,
                const Tensor& save_to) {
  SeqView v;
  v.saves = StateSaves::of(meta, save_to);
  SYV_CHECK(meta.seq_starts.ndim == 1 && meta.seq_starts.dim(0) >= 1) << "meta.seq_starts";
  v.num_seqs = static_cast<int32_t>(meta.seq_starts.dim(0) - 1);
  v.starts = meta.seq_starts.as<const int32_t>();
  SYV_CHECK_EQ(v.starts[v.num_seqs], num_tokens) << "seq_starts does not cover the tokens";
  SYV_CHECK(!meta.state_slots.empty() && meta.state_slots.numel() == v.num_seqs)
      << "hybrid ops need one state slot per sequence (meta.state_slots has "
      << meta.state_slots.numel() << ", batch has " << v.num_seqs << " sequences)";
  v.slots = meta.state_slots.as<const int32_t>();
  for (int32_t s = 0; s < v.num_seqs; ++s) {
    SYV_CHECK(v.slots[s] >= -1 && v.slots[s] < num_slots)
        << "sequence " << s << " has state slot " << v.slots[s] << " of " << num_slots;
  }
  return v;
}

}  // namespace

void causal_conv1d_silu(const Tensor& x, const Tensor& weight, Tensor& conv_state, Tensor& save_to,
                        const BatchMeta& meta, Tensor& out) {
  require_f32(x, "conv1d x");
  require_f32(out, "conv1d out");
  require_f32(conv_state, "conv1d state");
  SYV_CHECK(x.ndim == 2 && out.ndim == 2 && weight.ndim == 2 && conv_state.ndim == 3)
      << "conv1d ranks";
  const int64_t T = x.dim(0), C = x.dim(1), K = weight.dim(1);
  SYV_CHECK_EQ(weight.dim(0), C) << "conv1d weight channels";
  SYV_CHECK_EQ(conv_state.dim(1), K - 1) << "conv1d state length";
  SYV_CHECK_EQ(conv_state.dim(2), C) << "conv1d state channels";
  SYV_CHECK(out.dim(0) == T && out.dim(1) == C) << "conv1d out shape";
  SYV_CHECK(out.data != x.data) << "conv1d out may not alias x";
  const SeqView sv = seqs_of(meta, T, conv_state.dim(0), save_to);
  if (sv.saves.count > 0) {
    require_f32(save_to, "conv1d save_to");
    SYV_CHECK(save_to.ndim == 3 && save_to.dim(1) == K - 1 && save_to.dim(2) == C)
        << "conv1d save_to must be [checkpoints, K - 1, C]";
  }
  float* saves = sv.saves.count > 0 ? save_to.as<float>() : nullptr;
  const std::vector<float> w = load_range(weight, 0, C * K);
  const float* xp = x.as<const float>();
  float* op = out.as<float>();
  float* state = conv_state.as<float>();

  ThreadPool::global().parallel_for(
      int64_t{sv.num_seqs} * C,
      [&](int64_t begin, int64_t end) {
        std::vector<float> hist(static_cast<size_t>(K));
        for (int64_t i = begin; i < end; ++i) {
          const int64_t s = i / C, c = i % C;
          if (sv.slots[s] < 0) {  // padding: no state, zero outputs
            for (int64_t t = sv.starts[s]; t < sv.starts[s + 1]; ++t) op[t * C + c] = 0.f;
            continue;
          }
          float* st = state + int64_t{sv.slots[s]} * (K - 1) * C;
          for (int64_t j = 0; j < K - 1; ++j) hist[j] = st[j * C + c];  // oldest first
          const float* wc = w.data() + c * K;
          int32_t next = sv.saves.begin(s);
          for (int64_t t = sv.starts[s]; t < sv.starts[s + 1]; ++t) {
            hist[K - 1] = xp[t * C + c];
            float acc = 0.f;
            for (int64_t j = 0; j < K; ++j) acc += wc[j] * hist[j];
            op[t * C + c] = silu(acc);
            for (int64_t j = 0; j + 1 < K; ++j) hist[j] = hist[j + 1];
            if (next < sv.saves.end(s) && sv.saves.after[next] == t + 1 - sv.starts[s]) {
              float* dst = saves + int64_t{sv.saves.dests[next]} * (K - 1) * C;
              for (int64_t j = 0; j < K - 1; ++j) dst[j * C + c] = hist[j];
              ++next;
            }
          }
          for (int64_t j = 0; j < K - 1; ++j) st[j * C + c] = hist[j];
        }
      },
      16);
}

void gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log,
                      const Tensor& dt_bias, const GdnShape& shape, Tensor& state, Tensor& save_to,
                      const BatchMeta& meta, Tensor& out) {
  require_f32(qkv, "gdn qkv");
  require_f32(ba, "gdn ba");
  require_f32(state, "gdn state");
  require_f32(out, "gdn out");
  const int64_t Hk = shape.num_k_heads, Hv = shape.num_v_heads;
  const int64_t dk = shape.k_head_dim, dv = shape.v_head_dim;
  SYV_CHECK(Hk > 0 && Hv > 0 && Hv % Hk == 0) << "gdn heads Hk=" << Hk << " Hv=" << Hv;
  const int64_t T = qkv.dim(0);
  SYV_CHECK_EQ(qkv.numel(), T * shape.conv_dim()) << "gdn qkv width";
  SYV_CHECK_EQ(ba.numel(), T * 2 * Hv) << "gdn ba width";
  SYV_CHECK_EQ(out.numel(), T * Hv * dv) << "gdn out width";
  SYV_CHECK(state.ndim == 4 && state.dim(1) == Hv && state.dim(2) == dk && state.dim(3) == dv)
      << "gdn state must be [slots, Hv, dk, dv]";
  SYV_CHECK(a_log.numel() == Hv && dt_bias.numel() == Hv) << "gdn A_log / dt_bias size";
  const SeqView sv = seqs_of(meta, T, state.dim(0), save_to);
  if (sv.saves.count > 0) {
    require_f32(save_to, "gdn save_to");
    SYV_CHECK(save_to.ndim == 4 && save_to.dim(1) == Hv && save_to.dim(2) == dk &&
              save_to.dim(3) == dv)
        << "gdn save_to must be [checkpoints, Hv, dk, dv]";
  }
  float* saves = sv.saves.count > 0 ? save_to.as<float>() : nullptr;
  const std::vector<float> alog = load_range(a_log, 0, Hv);
  const std::vector<float> dtb = load_range(dt_bias, 0, Hv);
  const int64_t ratio = Hv / Hk, width = shape.conv_dim(), key_dim = Hk * dk;
  const float q_scale = 1.f / std::sqrt(static_cast<float>(dk));
  const float* in = qkv.as<const float>();
  const float* bap = ba.as<const float>();
  float* op = out.as<float>();
  float* sp = state.as<float>();

  ThreadPool::global().parallel_for(int64_t{sv.num_seqs} * Hv, [&](int64_t begin, int64_t end) {
    std::vector<float> q(dk), k(dk), kv_mem(dv), delta(dv);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t s = i / Hv, h = i % Hv, kh = h / ratio;
      if (sv.slots[s] < 0) {  // padding: no state, zero outputs
        for (int64_t t = sv.starts[s]; t < sv.starts[s + 1]; ++t)
          std::fill_n(op + t * Hv * dv + h * dv, dv, 0.f);
        continue;
      }
      float* S = sp + (int64_t{sv.slots[s]} * Hv + h) * dk * dv;  // [dk, dv]
      const float A = std::exp(alog[h]);
      int32_t next = sv.saves.begin(s);
      for (int64_t t = sv.starts[s]; t < sv.starts[s + 1]; ++t) {
        const float* row = in + t * width;
        const float* qr = row + kh * dk;
        const float* kr = row + key_dim + kh * dk;
        const float* vr = row + 2 * key_dim + h * dv;
        float qq = 0.f, kk = 0.f;
        for (int64_t d = 0; d < dk; ++d) {
          qq += qr[d] * qr[d];
          kk += kr[d] * kr[d];
        }
        const float qn = 1.f / std::sqrt(qq + 1e-6f), kn = 1.f / std::sqrt(kk + 1e-6f);
        for (int64_t d = 0; d < dk; ++d) {
          q[d] = qr[d] * qn * q_scale;
          k[d] = kr[d] * kn;
        }
        const float beta = sigmoid(bap[t * 2 * Hv + h]);
        const float g = -A * softplus(bap[t * 2 * Hv + Hv + h] + dtb[h]);
        const float decay = std::exp(g);
        std::fill(kv_mem.begin(), kv_mem.end(), 0.f);
        for (int64_t a = 0; a < dk; ++a) {
          float* Sa = S + a * dv;
          for (int64_t b = 0; b < dv; ++b) {
            Sa[b] *= decay;
            kv_mem[b] += Sa[b] * k[a];
          }
        }
        for (int64_t b = 0; b < dv; ++b) delta[b] = (vr[b] - kv_mem[b]) * beta;
        float* o = op + t * Hv * dv + h * dv;
        std::fill(o, o + dv, 0.f);
        for (int64_t a = 0; a < dk; ++a) {
          float* Sa = S + a * dv;
          for (int64_t b = 0; b < dv; ++b) {
            Sa[b] += k[a] * delta[b];
            o[b] += Sa[b] * q[a];
          }
        }
        if (next < sv.saves.end(s) && sv.saves.after[next] == t + 1 - sv.starts[s]) {
          std::copy_n(S, dk * dv, saves + (int64_t{sv.saves.dests[next]} * Hv + h) * dk * dv);
          ++next;
        }
      }
    }
  });
}

void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) {
  require_f32(x, "gated_rmsnorm x");
  require_f32(z, "gated_rmsnorm z");
  require_f32(out, "gated_rmsnorm out");
  const int64_t D = w.numel();
  SYV_CHECK(D > 0 && x.numel() % D == 0) << "gated_rmsnorm: " << x.numel() << " % " << D;
  SYV_CHECK(z.numel() == x.numel() && out.numel() == x.numel()) << "gated_rmsnorm sizes";
  const int64_t N = x.numel() / D;
  const std::vector<float> wf = load_range(w, 0, D);
  const float* xp = x.as<const float>();
  const float* zp = z.as<const float>();
  float* op = out.as<float>();
  ThreadPool::global().parallel_for(
      N,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float* xr = xp + r * D;
          const float* zr = zp + r * D;
          float ss = 0.f;
          for (int64_t d = 0; d < D; ++d) ss += xr[d] * xr[d];
          const float inv = 1.f / std::sqrt(ss / static_cast<float>(D) + eps);
          for (int64_t d = 0; d < D; ++d) op[r * D + d] = wf[d] * (xr[d] * inv) * silu(zr[d]);
        }
      },
      64);
}

void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) {
  require_f32(x, "sigmoid_mul x");
  require_f32(gate, "sigmoid_mul gate");
  require_f32(out, "sigmoid_mul out");
  SYV_CHECK_EQ(out.numel(), x.numel()) << "sigmoid_mul out";
  const int64_t T = x.dim(0), N = x.numel() / T;
  const bool broadcast = gate.numel() == T;
  SYV_CHECK(broadcast || gate.numel() == x.numel()) << "sigmoid_mul gate must be [T, N] or [T, 1]";
  const float* xp = x.as<const float>();
  const float* gp = gate.as<const float>();
  float* op = out.as<float>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      const float g = broadcast ? gp[t] : gp[t * N + n];
      op[t * N + n] = xp[t * N + n] * sigmoid(g);
    }
  }
}

void moe_topk(const Tensor& logits, int32_t top_k, bool renormalize, Tensor& ids, Tensor& weights) {
  require_f32(logits, "moe_topk logits");
  require_f32(weights, "moe_topk weights");
  SYV_CHECK(ids.dtype == DType::I32) << "moe_topk ids must be i32";
  const int64_t T = logits.dim(0), E = logits.dim(1);
  SYV_CHECK(top_k >= 1 && top_k <= E) << "moe top_k " << top_k << " of " << E << " experts";
  SYV_CHECK(ids.numel() == T * top_k && weights.numel() == T * top_k) << "moe_topk outputs";
  const float* lp = logits.as<const float>();
  int32_t* ip = ids.as<int32_t>();
  float* wp = weights.as<float>();
  std::vector<float> p(E);
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* l = lp + t * E;
    const float mx = *std::max_element(l, l + E);
    float sum = 0.f;
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(l[e] - mx));
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    float top_sum = 0.f;
    for (int32_t j = 0; j < top_k; ++j) top_sum += p[order[j]];
    for (int32_t j = 0; j < top_k; ++j) {
      ip[t * top_k + j] = order[j];
      wp[t * top_k + j] = renormalize ? p[order[j]] / top_sum : p[order[j]];
    }
  }
}

void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, Tensor& out, bool batch_invariant,
                 const LinearObserver& observe) {
  require_f32(x, "moe x");
  require_f32(weights, "moe weights");
  require_f32(out, "moe out");
  SYV_CHECK(ids.dtype == DType::I32) << "moe ids must be i32";
  SYV_CHECK(gate_up.ndim == 3 && down.ndim == 3) << "moe weights must be [E, 2I, H] and [E, H, I]";
  const int64_t T = x.dim(0), H = x.dim(1);
  const int64_t E = gate_up.dim(0), I2 = gate_up.dim(1), I = I2 / 2;
  SYV_CHECK(gate_up.dim(2) == H && down.dim(0) == E && down.dim(1) == H && down.dim(2) == I)
      << "moe weight shapes";
  SYV_CHECK(out.dim(0) == T && out.dim(1) == H) << "moe out shape";
  const int64_t k = ids.numel() / std::max<int64_t>(T, 1);
  SYV_CHECK_EQ(weights.numel(), T * k) << "moe weights count";
  const int32_t* ip = ids.as<const int32_t>();
  const float* xp = x.as<const float>();

  // Tokens routed to each expert, as (token, j) pairs.
  std::vector<std::vector<int64_t>> routed(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ip[t * k + j];
      SYV_CHECK(e >= 0 && e < E) << "expert id " << e << " of " << E;
      routed[e].push_back(t * k + j);
    }
  }
  // y[t, j, :] = expert output of token t for its j-th choice.
  std::vector<float> y(static_cast<size_t>(T * k * H), 0.f);
  std::vector<float> xs, gu, act, ys;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = static_cast<int64_t>(routed[e].size());
    if (n == 0) continue;
    xs.resize(n * H);
    for (int64_t r = 0; r < n; ++r) std::copy_n(xp + (routed[e][r] / k) * H, H, &xs[r * H]);
    // f32 weights (the CPU backend widens at load) are used in place; others converted per use.
    std::vector<float> wgu_tmp, wd_tmp;
    const float* wgu = f32_range(gate_up, e * I2 * H, I2 * H, &wgu_tmp);
    const float* wd = f32_range(down, e * H * I, H * I, &wd_tmp);
    const auto slice = [](const Tensor& w, int64_t element) {
      return static_cast<const char*>(w.data) + element * static_cast<int64_t>(dtype_size(w.dtype));
    };
    if (observe) {
      observe(Tensor(xs.data(), DType::F32, {n, H}),
              Tensor(const_cast<char*>(slice(gate_up, e * I2 * H)), gate_up.dtype, {I2, H}));
    }
    gu.resize(n * I2);
    if (batch_invariant)
      linear_invariant(xs.data(), wgu, gu.data(), n, I2, H);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, I2, H, 1.f, xs.data(), H, wgu, H, 0.f,
                  gu.data(), I2);
    act.resize(n * I);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < I; ++i) act[r * I + i] = silu(gu[r * I2 + i]) * gu[r * I2 + I + i];
    }
    if (observe) {
      observe(Tensor(act.data(), DType::F32, {n, I}),
              Tensor(const_cast<char*>(slice(down, e * H * I)), down.dtype, {H, I}));
    }
    ys.resize(n * H);
    if (batch_invariant)
      linear_invariant(act.data(), wd, ys.data(), n, H, I);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, H, I, 1.f, act.data(), I, wd, I, 0.f,
                  ys.data(), H);
    for (int64_t r = 0; r < n; ++r) std::copy_n(&ys[r * H], H, &y[routed[e][r] * H]);
  }
  // out[t] = sum over choices in ascending expert order (the order transformers accumulates in).
  const float* wp = weights.as<const float>();
  float* op = out.as<float>();
  std::vector<int64_t> js(k);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(js.begin(), js.end(), 0);
    std::sort(js.begin(), js.end(),
              [&](int64_t a, int64_t b) { return ip[t * k + a] < ip[t * k + b]; });
    float* o = op + t * H;
    std::fill(o, o + H, 0.f);
    for (int64_t j : js) {
      const float wj = wp[t * k + j];
      const float* yr = &y[(t * k + j) * H];
      for (int64_t h = 0; h < H; ++h) o[h] += yr[h] * wj;
    }
  }
}

}  // namespace syv::cpu

// ---- CpuBackend overrides -------------------------------------------------------------------

namespace syv {

void CpuBackend::causal_conv1d_silu(const Tensor& x, const Tensor& weight, Tensor& conv_state,
                                    Tensor& save_to, const BatchMeta& meta, Tensor& out) {
  cpu::causal_conv1d_silu(x, weight, conv_state, save_to, meta, out);
}

void CpuBackend::gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log,
                                  const Tensor& dt_bias, const GdnShape& shape, Tensor& state,
                                  Tensor& save_to, const BatchMeta& meta, Tensor& out) {
  cpu::gated_delta_rule(qkv, ba, a_log, dt_bias, shape, state, save_to, meta, out);
}

void CpuBackend::gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                               Tensor& out) {
  cpu::gated_rmsnorm(x, z, w, eps, out);
}

void CpuBackend::sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) {
  cpu::sigmoid_mul(x, gate, out);
}

void CpuBackend::moe_topk(const Tensor& logits, int32_t top_k, bool renormalize, Tensor& ids,
                          Tensor& weights) {
  cpu::moe_topk(logits, top_k, renormalize, ids, weights);
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                             const Tensor& gate_up, const Tensor& down, Tensor& out) {
  cpu::moe_experts(x, ids, weights, gate_up, down, out, batch_invariant_, linear_observer_);
}

}  // namespace syv
