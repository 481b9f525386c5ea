// `syv bench grammar`: the structured-output cost per generated token on one thread, for a
// model's vocabulary, a JSON Schema (or a GBNF grammar) and a document the grammar accepts: the
// token mask at each position of the tokenized document plus advancing over its token, cold (a
// new grammar: nothing cached) and warm (the same grammar again: the engine's case for repeated
// schemas). Prints one line, or JSON with --json. docs/structured-outputs.md has figures.
//
//   syv bench grammar --tokenizer DIR --schema order.json --document order-example.json
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/bench.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

struct Options {
  std::string tokenizer;
  std::string schema;
  std::string grammar;
  std::string document;
  int32_t repeat = 5;
  bool json = false;
};

Result<std::string> read_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(std::string(flag) + ": cannot read \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const Options& o) {
  if (o.schema.empty() == o.grammar.empty()) return fail("give one of --schema and --grammar");
  if (o.repeat < 1) return fail("--repeat: expected >= 1, found " + std::to_string(o.repeat));
  auto tok = Tokenizer::load(o.tokenizer);
  if (!tok.ok()) return fail(tok.message(), "--tokenizer takes a folder with tokenizer.json");
  auto doc = read_file(o.document, "--document");
  if (!doc.ok()) return fail(doc.message());
  std::string gbnf;
  if (!o.schema.empty()) {
    auto text = read_file(o.schema, "--schema");
    if (!text.ok()) return fail(text.message());
    nlohmann::ordered_json schema = nlohmann::ordered_json::parse(*text, nullptr, false);
    if (schema.is_discarded()) return fail("--schema: \"" + o.schema + "\" is not JSON");
    auto converted = grammar::json_schema_to_gbnf(schema);
    if (!converted.ok()) return fail("--schema: " + converted.message());
    gbnf = *converted;
  } else {
    auto text = read_file(o.grammar, "--grammar");
    if (!text.ok()) return fail(text.message());
    gbnf = *text;
  }
  auto g = grammar::Grammar::parse(gbnf);
  if (!g.ok()) return fail(g.message());

  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> bytes(static_cast<size_t>((*tok)->vocab_size()));
  for (int32_t id = 0; id < (*tok)->vocab_size(); ++id)
    if (!(*tok)->is_added(id)) bytes[static_cast<size_t>(id)] = (*tok)->token_bytes(id);
  auto trie = std::make_shared<const grammar::TokenTrie>(std::move(bytes));
  const double trie_s = seconds_since(t0);
  const std::vector<int32_t> tokens = (*tok)->encode(*doc, false);

  // One walk over the document: a mask per position, then the token.
  auto walk = [&](const std::shared_ptr<grammar::GrammarSession>& session) -> Status {
    grammar::Matcher m(session);
    for (size_t i = 0; i < tokens.size(); ++i) {
      (void)m.allowed_tokens();
      if (!m.accept_token(tokens[static_cast<size_t>(i)])) {
        return Status::Error("--document: the grammar refuses token " + std::to_string(i) + " (\"" +
                             (*tok)->token_bytes(tokens[i]) + "\")");
      }
    }
    (void)m.allowed_tokens();
    if (!m.can_end()) return Status::Error("--document: the grammar does not accept its end");
    return Status::Ok();
  };
  const double positions = static_cast<double>(tokens.size() + 1);
  double cold_s = 0, warm_s = 0;
  std::shared_ptr<grammar::GrammarSession> session;
  for (int32_t r = 0; r < o.repeat; ++r) {
    session = std::make_shared<grammar::GrammarSession>(g.value(), trie);
    t0 = std::chrono::steady_clock::now();
    if (Status s = walk(session); !s.ok()) return fail(s.message());
    cold_s += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    if (Status s = walk(session); !s.ok()) return fail(s.message());
    warm_s += seconds_since(t0);
  }
  const double cold_us = cold_s * 1e6 / (positions * o.repeat);
  const double warm_us = warm_s * 1e6 / (positions * o.repeat);
  if (o.json) {
    std::printf("%s\n", nlohmann::json{{"vocab", (*tok)->vocab_size()},
                                       {"trie_nodes", trie->nodes().size()},
                                       {"trie_build_s", trie_s},
                                       {"tokens", tokens.size()},
                                       {"cold_us_per_token", cold_us},
                                       {"warm_us_per_token", warm_us},
                                       {"masks_per_document", session->masks_computed()}}
                            .dump()
                            .c_str());
  } else {
    std::printf(
        "%zu document tokens, vocabulary %d (trie of %zu nodes built in %.0f ms): mask + advance "
        "%.1f us/token cold, %.2f us/token warm (%zu masks computed per document)\n",
        tokens.size(), (*tok)->vocab_size(), trie->nodes().size(), trie_s * 1e3, cold_us, warm_us,
        session->masks_computed());
  }
  return 0;
}

BenchRegistration reg{
    "grammar", "Structured outputs: token-mask cost per token for a schema and a document",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--tokenizer", o->tokenizer, "Folder with tokenizer.json (a model folder).")
          ->required();
      app.add_option("--schema", o->schema, "JSON Schema file.");
      app.add_option("--grammar", o->grammar, "GBNF grammar file (instead of --schema).");
      app.add_option("--document", o->document, "A text the grammar accepts (e.g. a JSON file).")
          ->required();
      app.add_option("--repeat", o->repeat, "Cold + warm walks to average (default 5).");
      app.add_flag("--json", o->json, "Print the result as one JSON object.");
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
