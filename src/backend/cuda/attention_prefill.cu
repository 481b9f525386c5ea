// Prefill attention over paged K/V: the dispatcher (which kernel runs, see prefill_attention.h).
// The kernels live in attention_prefill_wgmma.cu (Hopper warpgroup MMA, the default) and
// attention_prefill_mma.cu (mma.sync, the fallback off compute capability 9.0), both on
// 128-row query tiles. Varlen everywhere: the tile list says which sequence and first token each
// block works on (kPrefillTileRows-row tiles, longest first); causality comes from the tokens'
// positions, so chunked prefill and mixed decode + prefill batches are exact. Quantized (fp8 /
// int4) caches always take the mma.sync kernel.
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/prefill_attention.h"

namespace syv::cuda {

// ---- variants ----------------------------------------------------------------------------------
namespace {

enum Variant { kWgmma128, kMma8w, kVariants };
constexpr const char* kVariantNames[kVariants] = {"wgmma128", "mma8w"};
constexpr int kDefaultVariant = kWgmma128;  // fastest measured on an H200 (cuda-backend-notes)

int initial_variant() {
  const char* e = std::getenv("SYV_PREFILL_ATTENTION");
  if (!e || !*e) return kDefaultVariant;
  const int v = find_prefill_attention_variant(e);
  if (v < 0) {
    std::string names;
    for (const char* n : kVariantNames) names += std::string(names.empty() ? "" : ", ") + n;
    cuda_fail(
        __FILE__, __LINE__, "SYV_PREFILL_ATTENTION",
        ("unknown prefill attention kernel \"" + std::string(e) + "\"; expected one of " + names)
            .c_str());
  }
  return v;
}
int& current_variant() {
  static int v = initial_variant();
  return v;
}

}  // namespace

int prefill_attention_variant_count() {
  return kVariants;
}
const char* prefill_attention_variant_name(int v) {
  return v >= 0 && v < kVariants ? kVariantNames[v] : "";
}
int find_prefill_attention_variant(std::string_view name) {
  for (int v = 0; v < kVariants; ++v)
    if (name == kVariantNames[v]) return v;
  return -1;
}
int default_prefill_attention_variant() {
  return kDefaultVariant;
}
void set_prefill_attention_variant(int v) {
  if (v < 0 || v >= kVariants)
    cuda_fail(
        __FILE__, __LINE__, "set_prefill_attention_variant",
        ("variant " + std::to_string(v) + " out of range [0, " + std::to_string(kVariants) + ")")
            .c_str());
  current_variant() = v;
}
int prefill_attention_variant() {
  return current_variant();
}
void set_prefill_wgmma_head_dim_256(bool on) {
  prefill::set_wgmma_head_dim_256(on);
}
void set_prefill_wgmma_tma(bool on) {
  prefill::set_wgmma_tma(on);
}
void set_prefill_wgmma_overlap(bool on) {
  prefill::set_wgmma_overlap(on);
}
namespace {
std::atomic<int> g_last_form{static_cast<int>(PrefillForm::kNone)};
}  // namespace
void prefill::note_form(PrefillForm form) {
  g_last_form.store(static_cast<int>(form), std::memory_order_relaxed);
}
PrefillForm last_prefill_form() {
  return static_cast<PrefillForm>(g_last_form.load(std::memory_order_relaxed));
}
bool prefill_wgmma_available() {
  return prefill::wgmma_available();
}

bool launch_attention_prefill(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles,
                              cudaStream_t s) {
  const bool quant = a.cache_t == DType::F8E4M3 || a.cache_t == DType::U4X2;
  if (a.q_t != DType::BF16 || a.out_t != DType::BF16 || (a.cache_t != DType::BF16 && !quant))
    return false;
  if (quant && (a.k_scales == nullptr || a.v_scales == nullptr)) return false;
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) return false;
  if (num_tiles == 0) return true;
  // wgmma128 falls back to mma8w off compute capability 9.0, at head_dim 256 where
  // set_prefill_wgmma_head_dim_256(false) and for quantized caches (the mma8w kernel dequantizes
  // their K/V tiles into shared memory).
  if (current_variant() == kWgmma128 && !quant && prefill::launch_wgmma(a, tiles, num_tiles, s))
    return true;
  const bool launched = prefill::launch_mma128(a, tiles, num_tiles, s);
  if (launched) prefill::note_form(PrefillForm::kMma8w);
  return launched;
}

}  // namespace syv::cuda
