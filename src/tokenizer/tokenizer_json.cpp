#include "tokenizer/tokenizer_json.h"

namespace syv {
namespace {

using json = nlohmann::json;

class Handler : public nlohmann::json_sax<json> {
 public:
  explicit Handler(TokenizerJson& out) : out_(out) {}
  const std::string& error() const { return error_; }

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) {
      return vocab_id(v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v));
    }
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool binary(binary_t&) override { return fail("unexpected binary value"); }

  bool string(string_t& s) override {
    if (mode_ == Mode::kMerges) {
      const size_t index = merge_index_++;
      if (s.rfind("#version", 0) == 0) return true;  // HF skips these lines
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return fail("model.merges[" + std::to_string(index) +
                    "]: expected \"a b\" (two tokens, one space), found \"" + s + "\"");
      }
      out_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      pair_.push_back(std::move(s));
      return true;
    }
    return value(json(std::move(s)));
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) return wrong_entry("an object");
    if (at_model_field("vocab")) {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      return true;
    }
    return open(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(k);
    } else {
      keys_.back() = std::move(k);
    }
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kDom) return wrong_entry("an array");
    if (at_model_field("merges")) {
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      const size_t index = merge_index_++;
      mode_ = Mode::kMerges;
      if (pair_.size() != 2) {
        return fail("model.merges[" + std::to_string(index) +
                    "]: expected [\"a\", \"b\"] (two strings), found " +
                    std::to_string(pair_.size()) + " strings");
      }
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(std::string("not valid JSON: ") + e.what());
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  // True when the container being opened is root["model"][field].
  bool at_model_field(const char* field) const {
    return stack_.size() == 2 && keys_[0] == "model" && stack_[1]->is_object() && keys_[1] == field;
  }

  bool vocab_id(int64_t id) {
    if (id < 0 || id > INT32_MAX) {
      return fail("model.vocab[\"" + vocab_key_ + "\"]: expected a non-negative 32-bit id, found " +
                  std::to_string(id));
    }
    out_.vocab.emplace_back(std::move(vocab_key_), static_cast<int32_t>(id));
    return true;
  }

  bool wrong_entry(const char* what) {
    if (mode_ == Mode::kVocab) {
      return fail("model.vocab[\"" + vocab_key_ + "\"]: expected an integer id, found " + what);
    }
    return fail("model.merges[" + std::to_string(merge_index_) +
                "]: expected \"a b\" or [\"a\", \"b\"], found " + what);
  }

  // Adds a scalar (or, in vocab/merge modes, rejects it).
  bool value(json v) {
    if (mode_ == Mode::kVocab) return wrong_entry("a non-integer");
    if (mode_ == Mode::kMerges || mode_ == Mode::kMergePair) {
      return fail("model.merges[" + std::to_string(merge_index_) + "]: expected strings, found " +
                  v.dump().substr(0, 40));
    }
    place(std::move(v));
    return true;
  }

  json* place(json v) {
    if (stack_.empty()) {
      out_.root = std::move(v);
      return &out_.root;
    }
    json* top = stack_.back();
    if (top->is_object()) return &((*top)[keys_.back()] = std::move(v));
    top->push_back(std::move(v));
    return &top->back();
  }

  bool open(json container) {
    stack_.push_back(place(std::move(container)));
    keys_.emplace_back();
    return true;
  }

  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  TokenizerJson& out_;
  std::vector<json*> stack_;       // open DOM containers, outermost first
  std::vector<std::string> keys_;  // per open container: the current key (objects)
  Mode mode_ = Mode::kDom;
  std::string vocab_key_;
  std::vector<std::string> pair_;
  size_t merge_index_ = 0;
  std::string error_;
};

}  // namespace

Result<TokenizerJson> parse_tokenizer_json(const std::string& text) {
  TokenizerJson out;
  Handler handler(out);
  bool ok = false;
  try {
    ok = json::sax_parse(text, &handler);
  } catch (const json::exception& e) {
    return Status::Error(std::string("not valid JSON: ") + e.what());
  }
  if (!ok) {
    return Status::Error(handler.error().empty() ? "not valid JSON" : handler.error());
  }
  return out;
}

}  // namespace syv
