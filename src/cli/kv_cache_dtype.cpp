#include "cli/kv_cache_dtype.h"

#include "backend/kv_cache_view.h"
#include "core/log.h"

namespace syv::cli {

namespace {

constexpr const char* kChoices = "auto, bf16, f32, fp8 or int4";

}  // namespace

CLI::Option* add_kv_cache_dtype_arg(CLI::App& app, std::string& value) {
  return app
      .add_option(
          "--kv-cache-dtype", value,
          "Dtype of the paged KV cache: auto (the backend's activation dtype: bf16 on "
          "CUDA, f32 on the CPU), bf16, f32, fp8 (e4m3 with one scale per token and kv "
          "head: ~2x bf16's tokens) or int4 (one f16 scale per 32 elements: 3.56x; head_dim "
          "a multiple of 32). Quantized KV runs on the CPU and on CUDA (head_dim 64, 128 "
          "or 256 there); docs/configuration.md.")
      ->check(CLI::IsMember({"auto", "bf16", "f32", "fp8", "int4"}))
      ->capture_default_str();
}

Result<std::optional<DType>> parse_kv_cache_dtype(const std::string& value) {
  if (value == "auto") return std::optional<DType>();
  if (value == "bf16") return std::optional<DType>(DType::BF16);
  if (value == "f32") return std::optional<DType>(DType::F32);
  if (value == "fp8") return std::optional<DType>(DType::F8E4M3);
  if (value == "int4") return std::optional<DType>(DType::U4X2);
  return Status::Error("--kv-cache-dtype: expected " + std::string(kChoices) + ", found \"" +
                       value + "\"");
}

Status check_kv_head_dim(std::optional<DType> kv, const ModelConfig& config) {
  if (kv == DType::U4X2 && config.head_dim % kKvInt4Group != 0) {
    return Status::Error("--kv-cache-dtype int4: needs head_dim to be a multiple of " +
                         std::to_string(kKvInt4Group) + " (one scale per " +
                         std::to_string(kKvInt4Group) + " elements), the model's head_dim is " +
                         std::to_string(config.head_dim) + "; use fp8");
  }
  return Status::Ok();
}

Result<std::optional<DType>> resolve_kv_cache_dtype(const std::string& value,
                                                    const Backend& backend,
                                                    const ModelConfig& config) {
  SYV_ASSIGN_OR_RETURN(std::optional<DType> kv, parse_kv_cache_dtype(value));
  const std::string act(dtype_name(backend.activation_dtype()));
  if (!kv) {
    SYV_LOG(INFO) << "KV cache: " << act << " (--kv-cache-dtype auto: backend " << backend.name()
                  << "'s activation dtype)";
    return kv;
  }
  SYV_RETURN_IF_ERROR(check_kv_head_dim(kv, config));
  if (!backend.supports_kv_dtype(*kv)) {
    return Status::Error("--kv-cache-dtype " + value + ": backend " + backend.name() +
                         " has no kernels for KV in " + std::string(dtype_name(*kv)) +
                         " (it stores KV in " + act + "; use auto or " +
                         (act == "f32" ? "f32" : "bf16") + ")");
  }
  if (!backend.supports_kv_head_dim(*kv, config.head_dim)) {
    return Status::Error("--kv-cache-dtype " + value + ": backend " + backend.name() +
                         " has no kernels for KV in " + std::string(dtype_name(*kv)) +
                         " at the model's head_dim " + std::to_string(config.head_dim) +
                         " (use auto)");
  }
  const char* why = *kv == DType::F8E4M3 ? ": e4m3 with one f32 scale per (token, kv head)"
                    : *kv == DType::U4X2 ? ": 4-bit with one f16 scale per 32 elements"
                                         : "";
  SYV_LOG(INFO) << "KV cache: " << dtype_name(*kv) << " (--kv-cache-dtype " << value << why << ")";
  return kv;
}

}  // namespace syv::cli
