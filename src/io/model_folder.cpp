#include "io/model_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace syv {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxListed = 8;  // paths named in one message

const char* const kWhatToPass =
    "a Hugging Face model folder (config.json, tokenizer.json and *.safetensors, e.g. the folder "
    "`huggingface-cli download Qwen/Qwen3-0.6B` prints)";

bool has_extension(const fs::path& p, const std::string& ext) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e == ext;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Sorted subfolders of `dir` (none when it cannot be listed).
std::vector<fs::path> subfolders(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_dir(it->path())) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// "A", "A or B", "A, B or C", at most kMaxListed, then "(and N more)".
std::string list_paths(const std::vector<std::string>& paths) {
  std::string out;
  const size_t shown = std::min(paths.size(), kMaxListed);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += (i + 1 == shown && shown == paths.size()) ? " or " : ", ";
    out += paths[i];
  }
  if (paths.size() > shown) out += " (and " + std::to_string(paths.size() - shown) + " more)";
  return out;
}

// What kind of Hugging Face cache path `dir` is, judged by its name and layout.
enum class CacheKind { kNone, kRepo, kSnapshots, kHubRoot };

CacheKind cache_kind(const fs::path& dir) {
  const fs::path normal = dir.lexically_normal();
  std::string name = normal.filename().string();
  if (name.empty()) name = normal.parent_path().filename().string();  // "dir/" has no filename
  if (starts_with(name, "models--") || is_dir(dir / "snapshots")) return CacheKind::kRepo;
  if (name == "snapshots") return CacheKind::kSnapshots;
  for (const fs::path& sub : subfolders(dir)) {
    if (starts_with(sub.filename().string(), "models--")) return CacheKind::kHubRoot;
  }
  return CacheKind::kNone;
}

void add_snapshots(const fs::path& snapshots_dir, std::vector<std::string>& out) {
  for (const fs::path& snap : subfolders(snapshots_dir)) {
    if (is_file(snap / "config.json")) out.push_back(snap.string());
  }
}

}  // namespace

std::vector<std::string> hf_cache_snapshots(const std::string& path) {
  const fs::path dir(path);
  std::vector<std::string> out;
  switch (cache_kind(dir)) {
    case CacheKind::kNone:
      break;
    case CacheKind::kRepo:
      add_snapshots(dir / "snapshots", out);
      break;
    case CacheKind::kSnapshots:
      add_snapshots(dir, out);
      break;
    case CacheKind::kHubRoot:
      for (const fs::path& repo : subfolders(dir)) {
        if (starts_with(repo.filename().string(), "models--"))
          add_snapshots(repo / "snapshots", out);
      }
      break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status check_model_folder(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (ec || !fs::exists(st)) {
    return Status::NotFound("\"" + path + "\" does not exist; expected " + kWhatToPass);
  }
  if (!fs::is_directory(st)) {
    if (has_extension(p, ".gguf")) {
      return Status::Error("\"" + path +
                           "\" is a GGUF file, and syv does not read GGUF (llama.cpp's format); "
                           "pass " +
                           kWhatToPass + " instead");
    }
    const std::string parent = p.parent_path().empty() ? "." : p.parent_path().string();
    return Status::Error("\"" + path + "\" is a file; expected " + kWhatToPass +
                         " (the folder that holds it is \"" + parent + "\")");
  }
  if (is_file(p / "config.json")) return Status::Ok();

  const CacheKind kind = cache_kind(p);
  if (kind != CacheKind::kNone) {
    const std::vector<std::string> snapshots = hf_cache_snapshots(path);
    const std::string what = kind == CacheKind::kHubRoot ? "the Hugging Face cache root"
                             : kind == CacheKind::kSnapshots
                                 ? "a Hugging Face cache snapshots folder"
                                 : "a Hugging Face cache folder";
    if (snapshots.empty()) {
      return Status::Error("\"" + path + "\" is " + what +
                           " without a complete snapshot (no snapshots/<hash>/config.json); "
                           "download the model (e.g. `huggingface-cli download Qwen/Qwen3-0.6B`) "
                           "and pass the snapshots/<hash> folder it prints");
    }
    return Status::Error("\"" + path + "\" is " + what +
                         ", not a model folder; the model files are in snapshots/<hash>: pass " +
                         list_paths(snapshots));
  }

  std::vector<std::string> gguf;
  bool safetensors = false;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_file(it->path())) continue;
    if (has_extension(it->path(), ".gguf")) gguf.push_back(it->path().filename().string());
    if (has_extension(it->path(), ".safetensors")) safetensors = true;
  }
  if (!gguf.empty() && !safetensors) {
    std::sort(gguf.begin(), gguf.end());
    return Status::Error("\"" + path + "\" holds GGUF files (" + list_paths(gguf) +
                         ") and no config.json; syv does not read GGUF (llama.cpp's format): "
                         "pass " +
                         kWhatToPass + " instead");
  }
  return Status::Ok();
}

}  // namespace syv
