// Encode throughput of the real Qwen3 tokenizer on one thread, in MB/s of input text.
//   EnglishProse: ~1 MiB of public-domain English prose (Dickens, Austen, Melville, Lincoln),
//                 sentences shuffled with a fixed seed. Target: >= 5 MB/s on one core.
//   RandomWords:  letter strings that are rarely repeated, so most pieces miss the word cache
//                 (the BPE merge loop's own speed).
//   Decode:       ids of the prose back to text.
// Run: build/<dir>/tokenizer_bench [--benchmark_filter=EnglishProse]
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

const char* const kParagraphs[] = {
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the "
    "season of Light, it was the season of Darkness, it was the spring of hope, it was the winter "
    "of despair, we had everything before us, we had nothing before us, we were all going direct "
    "to Heaven, we were all going direct the other way.",
    "There were a king with a large jaw and a queen with a plain face, on the throne of England; "
    "there were a king with a large jaw and a queen with a fair face, on the throne of France. In "
    "both countries it was clearer than crystal to the lords of the State preserves of loaves and "
    "fishes, that things in general were settled for ever.",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be "
    "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families, that he is considered the rightful property of some one or other of "
    "their daughters.",
    "\"My dear Mr. Bennet,\" said his lady to him one day, \"have you heard that Netherfield Park "
    "is let at last?\" Mr. Bennet replied that he had not. \"But it is,\" returned she; \"for Mrs. "
    "Long has just been here, and she told me all about it.\"",
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in "
    "my purse, and nothing particular to interest me on shore, I thought I would sail about a "
    "little and see the watery part of the world. It is a way I have of driving off the spleen, "
    "and regulating the circulation.",
    "Whenever I find myself growing grim about the mouth; whenever it is a damp, drizzly November "
    "in my soul; whenever I find myself involuntarily pausing before coffin warehouses, and "
    "bringing up the rear of every funeral I meet; then, I account it high time to get to sea as "
    "soon as I can.",
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, "
    "conceived in Liberty, and dedicated to the proposition that all men are created equal. Now "
    "we are engaged in a great civil war, testing whether that nation, or any nation so "
    "conceived and so dedicated, can long endure.",
    "But, in a larger sense, we can not dedicate, we can not consecrate, we can not hallow this "
    "ground. The brave men, living and dead, who struggled here, have consecrated it, far above "
    "our poor power to add or detract. The world will little note, nor long remember what we say "
    "here, but it can never forget what they did here.",
};

std::vector<std::string> sentences() {
  std::vector<std::string> out;
  for (const char* p : kParagraphs) {
    std::string text(p);
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const bool end = (text[i] == '.' || text[i] == '?' || text[i] == ';') &&
                       (i + 1 == text.size() || text[i + 1] == ' ');
      if (end) {
        out.push_back(text.substr(start, i + 1 - start));
        start = i + 2;
      }
    }
    if (start < text.size()) out.push_back(text.substr(start));
  }
  return out;
}

const std::string& english_prose() {
  static const std::string text = [] {
    const auto pool = sentences();
    std::mt19937 rng(2024);
    std::string out;
    size_t in_paragraph = 0;
    while (out.size() < (1u << 20)) {
      out += pool[rng() % pool.size()];
      out += ++in_paragraph % 6 == 0 ? "\n\n" : " ";
    }
    return out;
  }();
  return text;
}

const std::string& random_words() {
  static const std::string text = [] {
    std::mt19937 rng(7);
    std::string out;
    while (out.size() < (1u << 20)) {
      const int length = 2 + static_cast<int>(rng() % 10);
      out += ' ';
      for (int i = 0; i < length; ++i) out += static_cast<char>('a' + rng() % 26);
    }
    return out;
  }();
  return text;
}

const syv::Tokenizer* qwen3() {
  static const std::unique_ptr<syv::Tokenizer> tok = [] {
    auto r = syv::Tokenizer::load(SYV_SOURCE_DIR "/third_party/qwen3-tokenizer");
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  return tok.get();
}

void encode_bench(benchmark::State& state, const std::string& text) {
  const syv::Tokenizer* tok = qwen3();
  if (tok == nullptr) {
    state.SkipWithError("third_party/qwen3-tokenizer missing: run tools/setup/fetch-tokenizer.sh");
    return;
  }
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] =
      static_cast<double>(text.size()) / static_cast<double>(tokens);
}

void BM_EncodeEnglishProse(benchmark::State& state) {
  encode_bench(state, english_prose());
}
void BM_EncodeRandomWords(benchmark::State& state) {
  encode_bench(state, random_words());
}

void BM_Decode(benchmark::State& state) {
  const syv::Tokenizer* tok = qwen3();
  if (tok == nullptr) {
    state.SkipWithError("third_party/qwen3-tokenizer missing: run tools/setup/fetch-tokenizer.sh");
    return;
  }
  const auto ids = tok->encode(english_prose());
  for (auto _ : state) {
    auto text = tok->decode(ids);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * english_prose().size()));
}

BENCHMARK(BM_EncodeEnglishProse)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeRandomWords)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
