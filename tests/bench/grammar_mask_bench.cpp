// Structured-output cost per generated token on one thread, with the real Qwen3 vocabulary
// (151,669 tokens) and a typical JSON Schema (an order: strings with bounds, an enum, integers
// with ranges, a nullable field, an array of objects), walking a conforming document token by
// token: the token mask of each position, then advancing the matcher over the token.
//   (/unbounded:1 runs the same schema without string length bounds, as Pydantic / zod emit it.)
//   Cold:      a fresh GrammarSession per document: every configuration's mask is computed by
//              a trie walk (what the first request with a new schema pays).
//   Warm:      the same session for every document (what later requests with the same schema
//              pay: the server hands them the same compiled grammar, so the engine reuses it).
//   MaskRow:   setting the refused logits of one 151,936-wide row to -inf (the sampler's part).
//   TrieBuild: the vocabulary trie, built once per engine.
// Reported: us_per_token (mask + advance), per iteration.
// Run: build/<dir>/grammar_mask_bench [--benchmark_filter=Cold]
#include <benchmark/benchmark.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using syv::grammar::Grammar;
using syv::grammar::GrammarSession;
using syv::grammar::Matcher;
using syv::grammar::TokenTrie;

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{6}$"},
    "customer": {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 60},
        "email": {"type": ["string", "null"], "maxLength": 80},
        "vip": {"type": "boolean"}},
      "required": ["name", "email", "vip"], "additionalProperties": false},
    "status": {"enum": ["pending", "paid", "shipped", "cancelled"]},
    "items": {"type": "array", "minItems": 1, "maxItems": 20, "items": {
        "type": "object", "properties": {
          "sku": {"type": "string", "maxLength": 16},
          "quantity": {"type": "integer", "minimum": 1, "maximum": 999},
          "price": {"type": "number"}},
        "required": ["sku", "quantity", "price"], "additionalProperties": false}},
    "notes": {"type": "string", "maxLength": 400}
  },
  "required": ["order_id", "customer", "status", "items", "notes"],
  "additionalProperties": false
})";

const char* kDocument =
    R"({"order_id": "AB-123456", "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "vip": true}, "status": "shipped", "items": [{"sku": "KB-001", "quantity": 2, "price": 49.9}, {"sku": "MS-17", "quantity": 1, "price": 19.5}, {"sku": "CBL-USB-C", "quantity": 12, "price": 3.25}], "notes": "Leave the parcel with the neighbour at number 12 if nobody answers; the customer asked for recyclable packaging and a printed invoice."})";

// The same schema as a client generating it from types alone would send it (Pydantic, zod):
// strings without length bounds, so the inside of a string is one configuration.
const char* kSchemaUnbounded = R"({
  "type": "object",
  "properties": {
    "order_id": {"type": "string"},
    "customer": {"type": "object", "properties": {
        "name": {"type": "string"},
        "email": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "vip": {"type": "boolean"}},
      "required": ["name", "email", "vip"], "additionalProperties": false},
    "status": {"enum": ["pending", "paid", "shipped", "cancelled"]},
    "items": {"type": "array", "items": {
        "type": "object", "properties": {
          "sku": {"type": "string"},
          "quantity": {"type": "integer"},
          "price": {"type": "number"}},
        "required": ["sku", "quantity", "price"], "additionalProperties": false}},
    "notes": {"type": "string"}
  },
  "required": ["order_id", "customer", "status", "items", "notes"],
  "additionalProperties": false
})";

struct Fixture {
  std::unique_ptr<syv::Tokenizer> tok;
  std::shared_ptr<const TokenTrie> trie;
  std::shared_ptr<const Grammar> grammar;            // kSchema
  std::shared_ptr<const Grammar> grammar_unbounded;  // kSchemaUnbounded
  std::vector<int32_t> tokens;
};

std::shared_ptr<const Grammar> compile(const char* schema) {
  auto gbnf = syv::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(schema));
  if (!gbnf.ok()) throw std::runtime_error(gbnf.message());
  auto g = Grammar::parse(gbnf.value());
  if (!g.ok()) throw std::runtime_error(g.message());
  return g.value();
}

std::vector<std::string> vocab_bytes(const syv::Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (!tok.is_added(id)) bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
  return bytes;
}

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    auto tok = syv::Tokenizer::load(SYV_SOURCE_DIR "/third_party/qwen3-tokenizer");
    if (!tok.ok()) throw std::runtime_error(tok.message());
    x.tok = std::move(tok.value());
    x.trie = std::make_shared<const TokenTrie>(vocab_bytes(*x.tok));
    x.grammar = compile(kSchema);
    x.grammar_unbounded = compile(kSchemaUnbounded);
    x.tokens = x.tok->encode(kDocument, false);
    return x;
  }();
  return f;
}

// Masks and advances over the whole document; returns the number of masked positions.
size_t walk(const std::shared_ptr<GrammarSession>& session, const std::vector<int32_t>& tokens) {
  Matcher m(session);
  size_t allowed = 0;
  for (int32_t t : tokens) {
    allowed += m.allowed_tokens()[0] & 1u;
    if (!m.accept_token(t)) throw std::runtime_error("document token refused");
  }
  if (!m.can_end()) throw std::runtime_error("document incomplete");
  benchmark::DoNotOptimize(allowed);
  return tokens.size() + 1;
}

void Cold(benchmark::State& state) {
  const Fixture& f = fixture();
  const auto& g = state.range(0) ? f.grammar_unbounded : f.grammar;
  size_t positions = 0;
  for (auto _ : state) positions += walk(std::make_shared<GrammarSession>(g, f.trie), f.tokens);
  state.counters["tokens"] = static_cast<double>(f.tokens.size());
  state.counters["us_per_token"] =
      benchmark::Counter(static_cast<double>(positions) * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(Cold)->Unit(benchmark::kMillisecond)->MinTime(2.0)->ArgName("unbounded")->Arg(0)->Arg(1);

void Warm(benchmark::State& state) {
  const Fixture& f = fixture();
  auto session =
      std::make_shared<GrammarSession>(state.range(0) ? f.grammar_unbounded : f.grammar, f.trie);
  walk(session, f.tokens);  // fills the mask cache
  size_t positions = 0;
  for (auto _ : state) positions += walk(session, f.tokens);
  state.counters["masks_cached"] = static_cast<double>(session->masks_cached());
  state.counters["us_per_token"] =
      benchmark::Counter(static_cast<double>(positions) * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(Warm)->Unit(benchmark::kMicrosecond)->ArgName("unbounded")->Arg(0)->Arg(1);

void MaskRow(benchmark::State& state) {
  const Fixture& f = fixture();
  auto session = std::make_shared<GrammarSession>(f.grammar, f.trie);
  Matcher m(session);
  const int32_t vocab = 151936;
  std::vector<float> row(static_cast<size_t>(vocab), 0.5f);
  syv::SamplerState s;
  s.constrained = true;
  s.allowed = m.allowed_tokens();  // '{' and friends: a sparse mask
  syv::SamplingParams p;
  for (auto _ : state) {
    syv::apply_bias_and_mask(row.data(), vocab, p, s);
    benchmark::DoNotOptimize(row.data());
  }
}
BENCHMARK(MaskRow)->Unit(benchmark::kMicrosecond);

void TrieBuild(benchmark::State& state) {
  const Fixture& f = fixture();
  const auto bytes = vocab_bytes(*f.tok);
  for (auto _ : state) benchmark::DoNotOptimize(TokenTrie(bytes).nodes().size());
}
BENCHMARK(TrieBuild)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
