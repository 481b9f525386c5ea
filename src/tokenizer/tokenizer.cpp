#include "tokenizer/tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "core/log.h"
#include "io/model_folder.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace syv {
namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) {
  return std::ifstream(path).good();
}

std::string describe(const nlohmann::json& j) {
  return j.dump().substr(0, 80);
}

// bos_token / eos_token: a string, {"content": ...} (AddedToken), or null.
Result<std::string> token_content(const nlohmann::json& config, const char* field) {
  if (!config.contains(field) || config[field].is_null()) return std::string();
  const auto& v = config[field];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return Status::Error(std::string(field) + ": expected a string or {\"content\": ...}, found " +
                       describe(v));
}

}  // namespace

// ---- loading ----------------------------------------------------------------------------------

Result<std::unique_ptr<TokenizerImpl>> TokenizerImpl::create(
    const std::string& tokenizer_json, const std::string& tokenizer_config_json) {
  auto impl = std::make_unique<TokenizerImpl>();
  // Fields of the wrong JSON type (e.g. "special": "yes") surface as nlohmann type errors.
  const char* file = "tokenizer.json";
  try {
    SYV_RETURN_IF_ERROR(impl->load_tokenizer_json(tokenizer_json).with_context(file));
    file = "tokenizer_config.json";
    if (!tokenizer_config_json.empty()) {
      SYV_RETURN_IF_ERROR(impl->load_config_json(tokenizer_config_json).with_context(file));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(std::string(file) + ": a field has the wrong type: " + e.what());
  }
  return impl;
}

Status TokenizerImpl::load_tokenizer_json(const std::string& text) {
  SYV_ASSIGN_OR_RETURN(TokenizerJson parsed, parse_tokenizer_json(text));
  const nlohmann::json& root = parsed.root;
  if (!root.is_object()) return Status::Error("expected a JSON object at the top level");
  if (!root.contains("model")) return Status::Error("missing \"model\"");
  const nlohmann::json& model = root["model"];
  if (!model.is_object()) return Status::Error("model: expected an object");
  const std::string type = model.value("type", parsed.has_merges ? "BPE" : "");
  if (type != "BPE") {
    return Status::Error("model type \"" + type +
                         "\" is not supported (syv implements byte-level BPE only)");
  }
  if (!parsed.has_vocab) return Status::Error("model.vocab: expected an object {token: id}");
  if (!parsed.has_merges) return Status::Error("model.merges: expected an array");
  SYV_ASSIGN_OR_RETURN(model_, BpeModel::from_json(model, parsed.vocab, parsed.merges));
  SYV_ASSIGN_OR_RETURN(normalizer_,
                       Normalizer::from_json(root.value("normalizer", nlohmann::json())));
  SYV_ASSIGN_OR_RETURN(pre_tokenizer_,
                       PreTokenizer::from_json(root.value("pre_tokenizer", nlohmann::json())));

  const auto decoder = root.value("decoder", nlohmann::json());
  const std::string decoder_type = decoder.is_object() ? decoder.value("type", "") : "";
  if (decoder_type != "ByteLevel") {
    return Status::Error("decoder: expected type \"ByteLevel\", found " + describe(decoder));
  }
  const auto post = root.value("post_processor", nlohmann::json());
  if (!post.is_null() && !(post.is_object() && post.value("type", "") == "ByteLevel")) {
    return Status::Error("post_processor type " + describe(post.value("type", nlohmann::json())) +
                         " is not supported (supported: ByteLevel, null)");
  }
  for (const char* field : {"truncation", "padding"}) {
    if (root.contains(field) && !root[field].is_null()) {
      SYV_LOG(WARN) << "tokenizer.json: \"" << field << "\" is ignored (syv encodes whole texts)";
    }
  }
  SYV_RETURN_IF_ERROR(load_added_tokens(root.value("added_tokens", nlohmann::json::array())));

  // Per-id tables: special flag and decoded bytes.
  vocab_size = model_->id_limit();
  for (const auto& [id, token] : added_by_id_) vocab_size = std::max(vocab_size, id + 1);
  std::unordered_set<std::string> special_contents;
  for (const auto& token : added_) {
    if (token->special) special_contents.insert(token->content);
  }
  special_.assign(static_cast<size_t>(vocab_size), 0);
  token_bytes_offsets_.assign(static_cast<size_t>(vocab_size) + 1, 0);
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::string token = id_to_token(id);
    special_[static_cast<size_t>(id)] = special_contents.count(token) ? 1 : 0;
    token_bytes_data_ += byte_level::decode_token(token);
    token_bytes_offsets_[static_cast<size_t>(id) + 1] =
        static_cast<uint32_t>(token_bytes_data_.size());
  }
  return Status::Ok();
}

// HF's AddedVocabulary::add_tokens applied to the "added_tokens" list in order: a token already
// in the vocabulary (added or model) keeps that id, a new one gets the next free id. The "id"
// written in the file is only checked.
Status TokenizerImpl::load_added_tokens(const nlohmann::json& list) {
  if (!list.is_array()) return Status::Error("added_tokens: expected an array");
  std::vector<const AddedToken*> specials, others;
  std::unordered_set<std::string> special_set;
  size_t index = 0;
  for (const auto& entry : list) {
    const std::string where = "added_tokens[" + std::to_string(index++) + "]";
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string()) {
      return Status::Error(where + ": expected an object with a string \"content\", found " +
                           describe(entry));
    }
    auto token = std::make_unique<AddedToken>();
    token->content = entry["content"].get<std::string>();
    if (!utf8::is_valid(token->content)) return Status::Error(where + ": content is not UTF-8");
    token->special = entry.value("special", false);
    token->normalized = entry.value("normalized", !token->special);
    token->lstrip = entry.value("lstrip", false);
    token->rstrip = entry.value("rstrip", false);
    token->single_word = entry.value("single_word", false);
    if (token->content.empty()) continue;
    bool duplicate = false;
    for (const auto& [id, existing] : added_by_id_) {
      duplicate |= existing->content == token->content && existing->special == token->special &&
                   existing->normalized == token->normalized && existing->lstrip == token->lstrip &&
                   existing->rstrip == token->rstrip && existing->single_word == token->single_word;
    }
    if (token->special && !special_set.count(token->content)) {
      special_set.insert(token->content);
      specials.push_back(token.get());
    }
    if (duplicate) {
      added_.push_back(std::move(token));
      continue;
    }
    int32_t id;
    if (auto it = added_ids_.find(token->content); it != added_ids_.end()) {
      id = it->second;
    } else if (auto model_id = model_->token_to_id(token->content)) {
      id = *model_id;
    } else {
      const auto entries = static_cast<int32_t>(model_->vocab_entries());
      int32_t max_id = -1;
      for (const auto& [c, existing_id] : added_ids_) max_id = std::max(max_id, existing_id);
      id = max_id < 0 ? entries : (max_id >= entries || entries == 0 ? max_id + 1 : entries);
    }
    if (entry.contains("id") && entry["id"].is_number_integer() &&
        entry["id"].get<int64_t>() != id) {
      SYV_LOG(WARN) << "tokenizer.json: " << where << " \"" << token->content << "\" has id "
                    << entry["id"].get<int64_t>() << " in the file but id " << id
                    << " by HF's rules; using " << id;
    }
    token->id = id;
    added_ids_[token->content] = id;
    added_by_id_[id] = token.get();
    if (!special_set.count(token->content)) others.push_back(token.get());
    added_.push_back(std::move(token));
  }
  for (const auto* list_part : {&specials, &others}) {
    for (const AddedToken* token : *list_part) {
      const AddedToken* current = added_by_id_.at(added_ids_.at(token->content));
      if (token->normalized) {
        normalized_matcher_.add(normalizer_.normalize(token->content), current);
      } else {
        raw_matcher_.add(token->content, current);
      }
    }
  }
  return Status::Ok();
}

Status TokenizerImpl::load_config_json(const std::string& text) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(std::string("not valid JSON: ") + e.what());
  }
  if (!config.is_object()) return Status::Error("expected a JSON object at the top level");
  SYV_ASSIGN_OR_RETURN(bos_token, token_content(config, "bos_token"));
  SYV_ASSIGN_OR_RETURN(eos_token, token_content(config, "eos_token"));
  if (!bos_token.empty()) bos_id = token_to_id(bos_token);
  if (!eos_token.empty()) eos_id = token_to_id(eos_token);
  for (auto [field, flag] : {std::pair{"add_bos_token", &add_bos}, {"add_eos_token", &add_eos}}) {
    if (!config.contains(field) || config[field].is_null()) continue;
    if (!config[field].is_boolean()) {
      return Status::Error(std::string(field) + ": expected true or false, found " +
                           describe(config[field]));
    }
    *flag = config[field].get<bool>();
  }
  if (add_bos && !bos_id) {
    return Status::Error("add_bos_token is true but bos_token \"" + bos_token +
                         "\" is not in the vocabulary");
  }
  if (add_eos && !eos_id) {
    return Status::Error("add_eos_token is true but eos_token \"" + eos_token +
                         "\" is not in the vocabulary");
  }
  if (config.contains("chat_template")) {
    const auto& ct = config["chat_template"];
    if (ct.is_string()) {
      chat_template = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const auto& entry : ct) {
        if (entry.is_object() && entry.value("name", "") == "default" &&
            entry.contains("template") && entry["template"].is_string()) {
          chat_template = entry["template"].get<std::string>();
        }
      }
    } else if (!ct.is_null()) {
      return Status::Error(
          "chat_template: expected a string or a list of {name, template}, found " + describe(ct));
    }
  }
  return Status::Ok();
}

// ---- encode / decode --------------------------------------------------------------------------

std::vector<int32_t> TokenizerImpl::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::to_valid_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens && add_bos) out.push_back(*bos_id);
  if (raw_matcher_.empty()) {
    encode_segment(text, out);
  } else {
    std::vector<AddedTokenMatcher::Split> splits;
    raw_matcher_.split(text, splits);
    for (const auto& s : splits) {
      if (s.id >= 0) {
        out.push_back(s.id);
      } else {
        encode_segment(text.substr(s.start, s.end - s.start), out);
      }
    }
  }
  if (add_special_tokens && add_eos) out.push_back(*eos_id);
  return out;
}

void TokenizerImpl::encode_segment(std::string_view text, std::vector<int32_t>& out) const {
  if (normalizer_.empty() && normalized_matcher_.empty()) {
    encode_normalized(text, out);
    return;
  }
  const std::string normalized = normalizer_.normalize(text);
  if (normalized_matcher_.empty()) {
    encode_normalized(normalized, out);
    return;
  }
  std::vector<AddedTokenMatcher::Split> splits;
  normalized_matcher_.split(normalized, splits);
  const std::string_view view = normalized;
  for (const auto& s : splits) {
    if (s.id >= 0) {
      out.push_back(s.id);
    } else {
      encode_normalized(view.substr(s.start, s.end - s.start), out);
    }
  }
}

void TokenizerImpl::encode_normalized(std::string_view text, std::vector<int32_t>& out) const {
  thread_local std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  pre_tokenizer_->pre_tokenize(text, pieces, storage);
  for (const auto& piece : pieces) model_->encode_piece(piece, out);
}

std::string TokenizerImpl::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) continue;
    if (skip_special_tokens && special_[static_cast<size_t>(id)]) continue;
    bytes += token_bytes(id);
  }
  return utf8::to_valid_lossy(bytes);
}

std::string_view TokenizerImpl::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size) return {};
  const uint32_t begin = token_bytes_offsets_[static_cast<size_t>(id)];
  const uint32_t end = token_bytes_offsets_[static_cast<size_t>(id) + 1];
  return std::string_view(token_bytes_data_).substr(begin, end - begin);
}

std::optional<int32_t> TokenizerImpl::token_to_id(std::string_view token) const {
  if (auto it = added_ids_.find(std::string(token)); it != added_ids_.end()) return it->second;
  return model_->token_to_id(token);
}

std::string TokenizerImpl::id_to_token(int32_t id) const {
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return it->second->content;
  return model_->id_to_token(id);
}

bool TokenizerImpl::is_added(int32_t id) const {
  return added_by_id_.count(id) != 0;
}

bool TokenizerImpl::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size && special_[static_cast<size_t>(id)] != 0;
}

// ---- Tokenizer --------------------------------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(const std::string& tokenizer_json,
                                                        const std::string& tokenizer_config_json) {
  SYV_ASSIGN_OR_RETURN(auto impl, TokenizerImpl::create(tokenizer_json, tokenizer_config_json));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& model_dir) {
  SYV_RETURN_IF_ERROR(check_model_folder(model_dir));  // GGUF, a Hugging Face cache root, a file
  const std::string json_path = model_dir + "/tokenizer.json";
  const std::string config_path = model_dir + "/tokenizer_config.json";
  SYV_ASSIGN_OR_RETURN(std::string json, read_file(json_path));
  std::string config;
  if (file_exists(config_path)) {
    SYV_ASSIGN_OR_RETURN(config, read_file(config_path));
  }
  auto impl = TokenizerImpl::create(json, config);
  if (!impl.ok()) return impl.status().with_context(model_dir);
  // Newer transformers save the template next to the config instead of inside it.
  const std::string template_path = model_dir + "/chat_template.jinja";
  if (impl.value()->chat_template.empty() && file_exists(template_path)) {
    SYV_ASSIGN_OR_RETURN(impl.value()->chat_template, read_file(template_path));
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl).value()));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}
std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}
std::string Tokenizer::token_bytes(int32_t id) const {
  return std::string(impl_->token_bytes(id));
}
int32_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}
std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->token_to_id(token);
}
std::string Tokenizer::id_to_token(int32_t id) const {
  return impl_->id_to_token(id);
}
bool Tokenizer::is_special(int32_t id) const {
  return impl_->is_special(id);
}
bool Tokenizer::is_added(int32_t id) const {
  return impl_->is_added(id);
}
const std::string& Tokenizer::chat_template() const {
  return impl_->chat_template;
}
std::string Tokenizer::bos_token() const {
  return impl_->bos_token;
}
std::string Tokenizer::eos_token() const {
  return impl_->eos_token;
}
std::optional<int32_t> Tokenizer::bos_token_id() const {
  return impl_->bos_id;
}
std::optional<int32_t> Tokenizer::eos_token_id() const {
  return impl_->eos_id;
}

}  // namespace syv
