// safetensors reader (mmap, validated header) and writer. Format: 8-byte little-endian header
// length N, N bytes of JSON header, then the data section; each header entry gives dtype, shape and
// [start, end) byte offsets relative to the data section.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "io/json_describe.h"

namespace syv {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Tensor names come from the file: print them with control / non-ASCII bytes escaped, bounded.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  size_t n = std::min<size_t>(s.size(), 200);
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > n) out += "...";
  return out + "\"";
}

// A short description of a JSON value for "found ..." messages (never throws).
std::string describe(const json& v) {
  return describe_json_value(v, [](const std::string& s) { return "string " + quoted(s); });
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A JSON integer >= 0 (non-negative int64 or uint64), or nullopt.
std::optional<uint64_t> as_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    if (x >= 0) return static_cast<uint64_t>(x);
  }
  return std::nullopt;
}

Status parse_entry(const std::string& fname, const std::string& tname, const json& e,
                   uint64_t data_size, TensorInfo* out, uint64_t* start_out, uint64_t* end_out) {
  auto err = [&](const std::string& what) {
    return Status::Error(fname + ": tensor " + quoted(tname) + ": " + what);
  };
  if (!e.is_object())
    return err("expected an object with dtype, shape, data_offsets, found " + describe(e));
  auto dt = e.find("dtype");
  if (dt == e.end()) return err("missing field \"dtype\"");
  if (!dt->is_string()) return err("field \"dtype\": expected a string, found " + describe(*dt));
  auto dtype = parse_safetensors_dtype(dt->get_ref<const std::string&>());
  if (!dtype.ok())
    return Status::Error(fname + ": tensor " + quoted(tname) + " has " + dtype.message());

  auto sh = e.find("shape");
  if (sh == e.end()) return err("missing field \"shape\"");
  if (!sh->is_array())
    return err("field \"shape\": expected an array of integers, found " + describe(*sh));
  uint64_t numel = 1;
  std::vector<int64_t> shape;
  shape.reserve(sh->size());
  for (const json& d : *sh) {
    auto v = as_u64(d);
    if (!v || *v > static_cast<uint64_t>(INT64_MAX)) {
      return err("field \"shape\": expected non-negative integers, found " + describe(d));
    }
    shape.push_back(static_cast<int64_t>(*v));
    if (__builtin_mul_overflow(numel, *v, &numel))
      return err("shape " + shape_str(shape) + "... overflows");
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(*dtype)), &nbytes)) {
    return err("shape " + shape_str(shape) + " overflows");
  }

  auto off = e.find("data_offsets");
  if (off == e.end()) return err("missing field \"data_offsets\"");
  if (!off->is_array() || off->size() != 2) {
    return err("field \"data_offsets\": expected [start, end], found " + describe(*off));
  }
  auto start = as_u64((*off)[0]);
  auto end = as_u64((*off)[1]);
  if (!start || !end) {
    return err("field \"data_offsets\": expected two non-negative integers, found " +
               describe((*off)[0]) + ", " + describe((*off)[1]));
  }
  if (*start > *end) {
    return err("data_offsets [" + std::to_string(*start) + ", " + std::to_string(*end) +
               "] are not ordered (start > end)");
  }
  if (*end > data_size) {
    return err("data_offsets [" + std::to_string(*start) + ", " + std::to_string(*end) +
               "] run past the data section of " + std::to_string(data_size) + " bytes");
  }
  if (*end - *start != nbytes) {
    return err("data_offsets [" + std::to_string(*start) + ", " + std::to_string(*end) + "] hold " +
               std::to_string(*end - *start) + " bytes, expected " + std::to_string(nbytes) +
               " for shape " + shape_str(shape) + " " + safetensors_dtype_name(*dtype));
  }
  out->name = tname;
  out->dtype = *dtype;
  out->shape = std::move(shape);
  out->bytes = static_cast<size_t>(nbytes);
  out->file = fname;
  *start_out = *start;
  *end_out = *end;
  return Status::Ok();
}

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Error(path + ": read error");
  return ss.str();
}

}  // namespace

Result<DType> parse_safetensors_dtype(const std::string& name) {
  if (name == "F32") return DType::F32;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  // The storage of pre-quantized checkpoints (model/quant_weights.h): fp8 weights, int32-packed
  // int4 words, g_idx, compressed-tensors' weight_shape. Model weights must still be float unless
  // config.json's quantization_config says how to read them.
  if (name == "F8_E4M3") return DType::F8E4M3;
  if (name == "I32") return DType::I32;
  if (name == "I64") return DType::I64;
  std::string msg = "dtype " + (name.size() <= 16 ? name : name.substr(0, 16) + "...") +
                    "; syv supports F32, F16, BF16 (and F8_E4M3, I32, I64 in quantized "
                    "checkpoints)";
  return Status::Error(msg);
}

std::string safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::U8:
      return "U8";
    case DType::F8E4M3:
      return "F8_E4M3";
    case DType::F8E5M2:
      return "F8_E5M2";
    case DType::U4X2:
      return "U8";  // packed int4 is stored as bytes (or wider integer words) in checkpoints
  }
  return "?";
}

// ---- SafetensorsFile --------------------------------------------------------------------------

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(const uint8_t* data, size_t size,
                                                                const std::string& name) {
  if (size < 8) {
    return Status::Error(name + ": file is " + std::to_string(size) +
                         " bytes; a safetensors file starts with an 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > size - 8) {
    return Status::Error(name + ": header length " + std::to_string(n) +
                         " runs past the end of the file (" + std::to_string(size) +
                         " bytes); the file is truncated or not safetensors");
  }
  if (n > kMaxSafetensorsHeaderBytes) {
    return Status::Error(name + ": header length " + std::to_string(n) + " exceeds the limit of " +
                         std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  const char* hbegin = reinterpret_cast<const char*>(data + 8);
  json header = json::parse(hbegin, hbegin + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    return Status::Error(name + ": header (" + std::to_string(n) + " bytes) is not valid JSON");
  }
  if (!header.is_object()) {
    return Status::Error(name + ": header: expected a JSON object, found " + describe(header));
  }
  const uint64_t data_offset = 8 + n;
  const uint64_t data_size = size - data_offset;

  auto file = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  file->name_ = name;
  struct Span {
    uint64_t start, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  spans.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    if (key == "__metadata__") {
      if (!it->is_object()) {
        return Status::Error(name + ": \"__metadata__\": expected an object of strings, found " +
                             describe(*it));
      }
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return Status::Error(name + ": \"__metadata__\" entry " + quoted(m.key()) +
                               ": expected a string, found " + describe(*m));
        }
        file->metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TensorInfo info;
    uint64_t start = 0, end = 0;
    SYV_RETURN_IF_ERROR(parse_entry(name, key, *it, data_size, &info, &start, &end));
    size_t align = dtype_size(info.dtype);
    if ((data_offset + start) % align != 0) {
      return Status::Error(name + ": tensor " + quoted(key) + " starts at file byte " +
                           std::to_string(data_offset + start) + ", not aligned to its " +
                           std::to_string(align) +
                           "-byte dtype; re-save the file with the safetensors library");
    }
    info.data = data + data_offset + start;
    auto [pos, inserted] = file->tensors_.emplace(key, std::move(info));
    (void)inserted;  // JSON object keys are unique after parsing
    spans.push_back({start, end, &pos->first});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.start != b.start ? a.start < b.start : a.end < b.end;
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    // Empty tensors occupy no bytes and may share an offset with anything.
    if (spans[i].start == spans[i].end || spans[i - 1].start == spans[i - 1].end) continue;
    if (spans[i].start < spans[i - 1].end) {
      return Status::Error(name + ": tensors " + quoted(*spans[i - 1].name) + " [" +
                           std::to_string(spans[i - 1].start) + ", " +
                           std::to_string(spans[i - 1].end) + ") and " + quoted(*spans[i].name) +
                           " [" + std::to_string(spans[i].start) + ", " +
                           std::to_string(spans[i].end) + ") overlap");
    }
  }
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::Error(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* map = nullptr;
  if (size > 0) {
    map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Status::Error(path + ": mmap of " + std::to_string(size) +
                           " bytes failed: " + std::strerror(e));
    }
  }
  ::close(fd);
  static const uint8_t kEmpty[1] = {0};
  auto parsed = parse(map ? static_cast<const uint8_t*>(map) : kEmpty, size, path);
  if (!parsed.ok()) {
    if (map) ::munmap(map, size);
    return parsed.status();
  }
  auto file = std::move(parsed).value();
  file->map_ = map;
  file->map_size_ = size;
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

// ---- WeightStore ------------------------------------------------------------------------------

Status WeightStore::add_file(std::shared_ptr<SafetensorsFile> file) {
  for (const auto& [tname, info] : file->tensors()) {
    auto [it, inserted] = index_.emplace(tname, &info);
    if (!inserted) {
      return Status::Error(dir_ + ": tensor " + quoted(tname) + " appears in both " +
                           it->second->file + " and " + file->name());
    }
  }
  files_.push_back(std::move(file));
  return Status::Ok();
}

Result<WeightStore> WeightStore::open_file(const std::string& path) {
  WeightStore store;
  store.dir_ = path;
  SYV_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(path));
  SYV_RETURN_IF_ERROR(store.add_file(std::shared_ptr<SafetensorsFile>(std::move(file))));
  return store;
}

Result<WeightStore> WeightStore::open_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::Error(dir + ": not a directory");
  WeightStore store;
  store.dir_ = dir;
  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";

  if (is_file(single)) {
    SYV_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(single));
    SYV_RETURN_IF_ERROR(store.add_file(std::shared_ptr<SafetensorsFile>(std::move(file))));
    return store;
  }

  if (is_file(index_path)) {
    SYV_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
    json index = json::parse(text, nullptr, false);
    if (index.is_discarded()) return Status::Error(index_path + ": not valid JSON");
    if (!index.is_object()) {
      return Status::Error(index_path + ": expected a JSON object, found " + describe(index));
    }
    auto wm = index.find("weight_map");
    if (wm == index.end()) return Status::Error(index_path + ": missing field \"weight_map\"");
    if (!wm->is_object()) {
      return Status::Error(index_path + ": field \"weight_map\": expected an object, found " +
                           describe(*wm));
    }
    std::vector<std::string> shard_names;  // in first-mention order
    std::set<std::string> seen;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string()) {
        return Status::Error(index_path + ": weight_map[" + quoted(it.key()) +
                             "]: expected a file name, found " + describe(*it));
      }
      const std::string& shard = it->get_ref<const std::string&>();
      fs::path sp(shard);
      bool bad = shard.empty() || sp.is_absolute();
      for (const auto& part : sp) bad = bad || part == "..";
      if (bad) {
        return Status::Error(index_path + ": weight_map[" + quoted(it.key()) +
                             "]: expected a file name inside the folder, found " + quoted(shard));
      }
      if (seen.insert(shard).second) shard_names.push_back(shard);
    }
    if (shard_names.empty()) return Status::Error(index_path + ": weight_map is empty");
    std::map<std::string, const SafetensorsFile*> by_shard;
    for (const std::string& shard : shard_names) {
      std::string p = dir + "/" + shard;
      if (!is_file(p)) {
        return Status::Error(index_path + ": shard " + quoted(shard) +
                             " named in weight_map not found (expected " + p + ")");
      }
      SYV_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(p));
      by_shard[shard] = file.get();
      SYV_RETURN_IF_ERROR(store.add_file(std::shared_ptr<SafetensorsFile>(std::move(file))));
    }
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      const SafetensorsFile* f = by_shard.at(it->get_ref<const std::string&>());
      if (!f->tensors().count(it.key())) {
        return Status::Error(index_path + ": weight_map places tensor " + quoted(it.key()) +
                             " in " + f->name() + ", which does not contain it");
      }
    }
    return store;
  }

  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec)) {
      paths.push_back(entry.path().string());
    }
  }
  if (ec) return Status::Error(dir + ": cannot list: " + ec.message());
  if (paths.empty()) {
    std::string gguf;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".gguf") gguf = entry.path().filename().string();
    }
    return Status::Error(dir +
                         ": no weights found (expected model.safetensors, "
                         "model.safetensors.index.json or *.safetensors)" +
                         (gguf.empty() ? std::string()
                                       : "; found " + gguf +
                                             ", but syv does not read GGUF: pass the Hugging "
                                             "Face folder of the model (*.safetensors)"));
  }
  std::sort(paths.begin(), paths.end());
  for (const std::string& p : paths) {
    SYV_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(p));
    SYV_RETURN_IF_ERROR(store.add_file(std::shared_ptr<SafetensorsFile>(std::move(file))));
  }
  return store;
}

const TensorInfo* WeightStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

Result<const TensorInfo*> WeightStore::get(const std::string& name,
                                           const std::vector<int64_t>& shape) const {
  const TensorInfo* t = find(name);
  if (!t) return Status::Error(dir_ + ": missing tensor " + quoted(name));
  if (t->shape != shape) {
    return Status::Error(t->file + ": tensor " + quoted(name) + " has shape " +
                         shape_str(t->shape) + ", config expects " + shape_str(shape));
  }
  return t;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& kv : index_) out.push_back(kv.first);
  return out;
}

size_t WeightStore::total_bytes() const {
  size_t n = 0;
  for (const auto& kv : index_) n += kv.second->bytes;
  return n;
}

std::vector<std::string> WeightStore::files() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f->name());
  return out;
}

// ---- writer -----------------------------------------------------------------------------------

Result<SafetensorsLayout> safetensors_layout(const std::string& path,
                                             const std::vector<TensorToWrite>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  std::vector<size_t> order;
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    if (t.name == "__metadata__")
      return Status::Error(path + ": tensor name \"__metadata__\" is reserved");
    if (!names.insert(t.name).second)
      return Status::Error(path + ": duplicate tensor " + quoted(t.name));
    for (int64_t d : t.shape) {
      if (d < 0)
        return Status::Error(path + ": tensor " + quoted(t.name) + " has negative shape " +
                             shape_str(t.shape));
    }
    order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    size_t sa = dtype_size(tensors[a].dtype), sb = dtype_size(tensors[b].dtype);
    return sa != sb ? sa > sb : tensors[a].name < tensors[b].name;
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<uint64_t> relative(tensors.size());
  for (size_t i : order) {
    const TensorToWrite& t = tensors[i];
    uint64_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
        return Status::Error(path + ": tensor " + quoted(t.name) + " shape overflows");
      }
    }
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n}}};
    relative[i] = offset;
    offset += n;
  }
  std::string h;
  try {
    h = header.dump();
  } catch (const json::exception& e) {
    return Status::Error(path + ": cannot encode header: " + e.what());
  }
  while (h.size() % 8 != 0) h += ' ';
  SafetensorsLayout layout;
  layout.prefix.resize(8);
  const uint64_t hl = h.size();
  for (int i = 0; i < 8; ++i) layout.prefix[i] = static_cast<char>(hl >> (8 * i));
  layout.prefix += h;
  layout.offsets.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    layout.offsets[i] = layout.prefix.size() + relative[i];
  layout.file_size = layout.prefix.size() + offset;
  return layout;
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  SYV_ASSIGN_OR_RETURN(SafetensorsLayout layout, safetensors_layout(path, tensors, metadata));
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
    if (tensors[i].data == nullptr && tensors[i].bytes() > 0)
      return Status::Error(path + ": tensor " + quoted(tensors[i].name) + " has no data");
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return layout.offsets[a] < layout.offsets[b]; });
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::Error(path + ": cannot create: " + std::strerror(errno));
  out.write(layout.prefix.data(), static_cast<std::streamsize>(layout.prefix.size()));
  for (size_t i : order) {
    const size_t n = tensors[i].bytes();
    if (n) out.write(static_cast<const char*>(tensors[i].data), static_cast<std::streamsize>(n));
  }
  out.close();
  if (!out) return Status::Error(path + ": write failed: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace syv
