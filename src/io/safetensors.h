// Read-only access to safetensors files: one file or shards listed in model.safetensors.index.json.
// Files are mmapped; every header length, offset and shape is validated before a byte is read.
// Supported dtypes: F32, F16, BF16, and the storage of quantized checkpoints F8_E4M3, I32, I64
// (others are refused by name, e.g. "model.safetensors: tensor \"x\" has dtype F8_E5M2; syv
// supports F32, F16, BF16 (and F8_E4M3, I32, I64 in quantized checkpoints)").
// Every tensor's data is aligned to its dtype size within the file (files written by the reference
// safetensors library and by write_safetensors always are; others are refused), so `data` may be
// read as float / uint16_t directly when the image itself is 8-byte aligned (mmap always is).
// See docs/model-folder.md.
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
  std::string file;  // the file it lives in (for error messages)

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Largest header syv accepts (the reference implementation uses the same bound).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// "F32" -> DType::F32, "F16", "BF16", "F8_E4M3", "I32", "I64"; any other name (F64, I8, U8,
// F8_E5M2, BOOL, ...) -> error "dtype F8_E5M2; syv supports ..." (callers prefix the file and
// tensor).
Result<DType> parse_safetensors_dtype(const std::string& name);
// DType::BF16 -> "BF16" (the name in a safetensors header); also I32/I64/U8 for the writer.
std::string safetensors_dtype_name(DType t);

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
  const std::string& name() const { return name_; }  // the path (or name given to parse)

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

 private:
  SafetensorsFile() = default;
  std::string name_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
};

// All tensors of a model folder (model.safetensors, or the shards of model.safetensors.index.json).
// Lookup order in open_dir: dir/model.safetensors; else dir/model.safetensors.index.json (every
// shard named in its weight_map must exist and hold the tensors mapped to it); else every
// dir/*.safetensors. A tensor name present in two files is an error. The store keeps the files
// mapped; TensorInfo pointers stay valid while any copy of the store lives.
class WeightStore {
 public:
  static Result<WeightStore> open_dir(const std::string& dir);
  // One file (no folder lookup); messages name `path`.
  static Result<WeightStore> open_file(const std::string& path);

  // nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  // The tensor with this name, dtype F32/F16/BF16 and exactly this shape, or an error naming the
  // file, the tensor, the expected and the found shape.
  Result<const TensorInfo*> get(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;
  const std::string& dir() const { return dir_; }
  // The files that were opened, in load order.
  std::vector<std::string> files() const;

 private:
  Status add_file(std::shared_ptr<SafetensorsFile> file);
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

// Writes tensors to a .safetensors file (used by `syv demo-model`, random models and tests).
// Like the reference implementation: data ordered by dtype size (largest first) then name, so
// every tensor is aligned; header padded with spaces to a multiple of 8 bytes. Names must be
// unique and not "__metadata__". Also writes I32/I64/F8_E4M3 (quantized checkpoints, `syv
// quantize`) and U8 (refused on reading; for tests).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;       // dtype_size(dtype) * prod(shape) bytes
  size_t bytes() const {  // (shapes that overflow are refused by the writer first)
    size_t n = dtype_size(dtype);
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }
};
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// The layout write_safetensors gives these tensors, without writing anything or reading `data`
// (so a caller can write the data itself, e.g. from several threads with pwrite): `prefix` is the
// 8-byte header length plus the header JSON padded to a multiple of 8 bytes, offsets[i] the file
// offset of tensors[i]'s data. Same checks (and messages, prefixed with `path`) as the writer.
struct SafetensorsLayout {
  std::string prefix;
  std::vector<uint64_t> offsets;
  uint64_t file_size = 0;
};
Result<SafetensorsLayout> safetensors_layout(
    const std::string& path, const std::vector<TensorToWrite>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace syv
