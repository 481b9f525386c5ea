#include "server/json_limits.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

namespace syv::server {

namespace {

constexpr size_t kFieldComponents = 4;  // "tools" "[0]" "function" "parameters"
constexpr size_t kPathComponents = 12;

// A SAX consumer that only tracks the path of open containers and counts values; returning false
// stops the parser.
class LimitSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit LimitSax(const JsonLimits& limits) : limits_(limits) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(/*array=*/false); }
  bool key(string_t& k) override {
    frames_.back().key = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(/*array=*/true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  const std::optional<JsonExcess>& excess() const { return excess_; }
  size_t values() const { return values_; }

 private:
  struct Frame {
    bool array = false;
    size_t index = 0;  // arrays: the index of the next element
    std::string key;   // objects: the current key
  };

  // Every value (scalar or container) takes the next index of an enclosing array.
  void advance_parent() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  // Counts one value; false (and the excess recorded) past the limit.
  bool count() {
    if (++values_ <= limits_.max_values) return true;
    excess_ = JsonExcess{true, render(kFieldComponents, true), render(kPathComponents, false)};
    return false;
  }
  bool value() {
    if (!count()) return false;
    advance_parent();
    return true;
  }
  bool open(bool array) {
    if (static_cast<int>(frames_.size()) >= limits_.max_depth) {
      excess_ = JsonExcess{false, render(kFieldComponents, true), render(kPathComponents, false)};
      return false;
    }
    if (!count()) return false;
    frames_.push_back(Frame{array, 0, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    advance_parent();
    return true;
  }
  // The path to the container being opened: each enclosing container contributes ".key" or "[i]".
  // At most `max_components` of them; `cut` marks a longer path with "...". As a field name, the
  // path ends at its last key ("messages[0].content", not "messages[0].content[0]").
  std::string render(size_t max_components, bool as_field) const {
    std::string out;
    size_t end = std::min(frames_.size(), max_components);
    if (as_field) {
      while (end > 0 && frames_[end - 1].array) --end;
    }
    for (size_t i = 0; i < end; ++i) {
      const Frame& f = frames_[i];
      if (f.array) {
        out += "[" + std::to_string(f.index) + "]";
      } else {
        if (!out.empty()) out += ".";
        out += f.key;
      }
    }
    if (!as_field && frames_.size() > max_components) out += "...";
    return out;
  }

  JsonLimits limits_;
  size_t values_ = 0;
  std::vector<Frame> frames_;
  std::optional<JsonExcess> excess_;
};

}  // namespace

std::optional<JsonExcess> find_json_excess(std::string_view text, const JsonLimits& limits,
                                           size_t* values) {
  LimitSax sax(limits);
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                            /*strict=*/true);
  if (values != nullptr) *values = sax.values();
  return sax.excess();
}

std::optional<JsonExcess> find_json_depth_excess(std::string_view text, int max_depth) {
  return find_json_excess(text, JsonLimits{max_depth, std::numeric_limits<size_t>::max()});
}

}  // namespace syv::server
