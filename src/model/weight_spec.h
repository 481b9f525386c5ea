// The weight table of a model: every tensor it reads, with the shape the config implies, plus the
// two ways of filling it (from the checkpoint or seeded random values) and the upload to a backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "io/safetensors.h"

namespace syv {

// How a random weight is drawn (LoadOptions::random_weights, `syv demo-model`).
enum class WeightInit : uint8_t {
  kNorm,        // 1 + U(-0.1, 0.1): plain-weight RMSNorm around 1
  kEmbedding,   // std 1
  kProjection,  // std 1/sqrt(fan_in), fan_in = shape.back()
  kZero,        // biases
};

struct WeightSpec {
  std::string name;  // as in the checkpoint, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // outermost first, as in the checkpoint
  WeightInit init = WeightInit::kProjection;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// "[512, 96]"
std::string shape_string(const std::vector<int64_t>& shape);

// Deterministic random values for weight number `index` of a model seeded with `seed`: the same on
// every machine and thread count. Writes spec.numel() floats.
void fill_random_weight(const WeightSpec& spec, uint64_t seed, uint64_t index, float* out);

// A weight in backend memory (dtype = backend.weight_dtype(file dtype)).
struct DeviceWeight {
  DeviceBuffer buffer;
  Tensor tensor;
};

// Reads weights from a checkpoint (store != nullptr) or draws them at random, checks them against
// their spec, and uploads them in the backend's preferred dtype.
class WeightLoader {
 public:
  // store == nullptr: random weights from `seed` (they count as bf16 "file" weights).
  WeightLoader(Backend& backend, const WeightStore* store, uint64_t seed);

  // Errors name the file, the tensor, the expected and the found shape / dtype.
  Result<DeviceWeight> load(const WeightSpec& spec);
  // Uploads host f32 values (e.g. weights fused from two tensors) in the backend's weight dtype.
  DeviceWeight upload(const std::vector<int64_t>& shape, DType file_dtype, const float* values);
  // Reads (or draws) one weight as host f32 values after the same checks as load().
  Result<std::vector<float>> read_f32(const WeightSpec& spec, DType* file_dtype);

  int64_t parameters_loaded() const { return parameters_; }
  int64_t device_bytes() const { return device_bytes_; }

 private:
  Backend& backend_;
  const WeightStore* store_;
  uint64_t seed_;
  uint64_t next_index_ = 0;
  int64_t parameters_ = 0;
  int64_t device_bytes_ = 0;
};

}  // namespace syv
