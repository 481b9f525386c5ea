#include "model/weight_spec.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/thread_pool.h"

namespace syv {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// splitmix64: a counter-based generator, so element i's value does not depend on threading.
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void fill_random_weight(const WeightSpec& spec, uint64_t seed, uint64_t index, float* out) {
  const int64_t n = spec.numel();
  const uint64_t stream = mix64(seed ^ mix64(index + 1));
  // Uniform U(-1, 1) has std 1/sqrt(3); scale to the wanted std.
  float scale = 0.0f, offset = 0.0f;
  switch (spec.init) {
    case WeightInit::kNorm:
      scale = 0.1f;
      offset = 1.0f;
      break;
    case WeightInit::kEmbedding:
      scale = std::sqrt(3.0f);
      break;
    case WeightInit::kProjection:
      scale = std::sqrt(3.0f / static_cast<float>(spec.shape.empty() ? 1 : spec.shape.back()));
      break;
    case WeightInit::kZero:
      break;
  }
  ThreadPool::global().parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const uint64_t bits = mix64(stream + static_cast<uint64_t>(i));
          const float u = static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;  // [-1, 1)
          out[i] = offset + scale * u;
        }
      },
      1 << 16);
}

WeightLoader::WeightLoader(Backend& backend, const WeightStore* store, uint64_t seed)
    : backend_(backend), store_(store), seed_(seed) {}

Result<std::vector<float>> WeightLoader::read_f32(const WeightSpec& spec, DType* file_dtype) {
  std::vector<float> values(static_cast<size_t>(spec.numel()));
  const uint64_t index = next_index_++;
  if (store_ == nullptr) {
    fill_random_weight(spec, seed_, index, values.data());
    *file_dtype = DType::BF16;
    return values;
  }
  const TensorInfo* info = store_->find(spec.name);
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
                         std::string(dtype_name(info->dtype)) + ", expected f32, f16 or bf16");
  }
  convert_to_f32(info->dtype, info->data, values.data(), values.size());
  *file_dtype = info->dtype;
  return values;
}

DeviceWeight WeightLoader::upload(const std::vector<int64_t>& shape, DType file_dtype,
                                  const float* values) {
  SYV_CHECK(!shape.empty() && shape.size() <= 2) << "weights are 1-D or 2-D";
  const DType dtype = backend_.weight_dtype(file_dtype);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  DeviceWeight w;
  w.buffer = backend_.allocate(static_cast<size_t>(n) * dtype_size(dtype));
  w.tensor = shape.size() == 1 ? w.buffer.view(dtype, {shape[0]})
                               : w.buffer.view(dtype, {shape[0], shape[1]});
  if (dtype == DType::F32) {
    backend_.upload(w.buffer.data(), values, static_cast<size_t>(n) * 4);
  } else {
    SYV_CHECK(dtype == DType::BF16 || dtype == DType::F16) << "weight dtype " << dtype_name(dtype);
    std::vector<uint16_t> narrow(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      narrow[i] = dtype == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
    backend_.upload(w.buffer.data(), narrow.data(), narrow.size() * 2);
  }
  parameters_ += n;
  device_bytes_ += static_cast<int64_t>(w.buffer.bytes());
  return w;
}

Result<DeviceWeight> WeightLoader::load(const WeightSpec& spec) {
  DType file_dtype = DType::BF16;
  SYV_ASSIGN_OR_RETURN(std::vector<float> values, read_f32(spec, &file_dtype));
  return upload(spec.shape, file_dtype, values.data());
}

}  // namespace syv
