// Read-only access to safetensors files: one file or shards listed in model.safetensors.index.json.
// Files are mmapped; every header length, offset and shape is validated before a byte is read.
// Supported dtypes: F32, F16, BF16 (others are refused by name, e.g. "F8_E4M3 is not supported").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace syv {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // points into the mmapped file; valid while the file is open
  size_t bytes = 0;
  std::string file;            // the file it lives in (for error messages)
};

// One mmapped .safetensors file.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Parses an in-memory image (used by open() and by the fuzzer). `name` is used in messages.
  static Result<std::unique_ptr<SafetensorsFile>> parse(const uint8_t* data, size_t size,
                                                        const std::string& name);
  ~SafetensorsFile();

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
};

// All tensors of a model folder (model.safetensors, or the shards of model.safetensors.index.json).
class WeightStore {
 public:
  static Result<WeightStore> open_dir(const std::string& dir);

  // nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  // The tensor with this name, dtype F32/F16/BF16 and exactly this shape, or an error naming the
  // file, the tensor, the expected and the found shape.
  Result<const TensorInfo*> get(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

// Writes tensors to a .safetensors file (used by `syv demo-model`, random models and tests).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // dtype_size(dtype) * prod(shape) bytes
};
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace syv
