// io/safetensors: round trips through write_safetensors, shards, and every class of bad input
// (each error message is checked for the file / tensor and the expected vs found values).
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "unit/expect_error.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

// A fresh empty folder per test.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("syv_st_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string dir() const { return dir_.string(); }
  fs::path dir_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors image with this header text (padded with spaces to 8 bytes, as the reference
// writer does, unless `pad` is false) and `data_bytes` zero bytes of data.
std::string image(std::string header, size_t data_bytes, bool pad = true) {
  while (pad && header.size() % 8 != 0) header += ' ';
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  out += header;
  out.append(data_bytes, '\0');
  return out;
}

Result<std::unique_ptr<SafetensorsFile>> parse_image(const std::string& bytes,
                                                     const std::string& name = "x.safetensors") {
  return SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
}

TEST_F(SafetensorsTest, RoundTripEachDtype) {
  std::mt19937 rng(7);
  std::vector<float> f32(6 * 5);
  for (auto& x : f32) x = std::uniform_real_distribution<float>(-3, 3)(rng);
  std::vector<uint16_t> bf16(7 * 3), f16(3);
  for (auto& x : bf16) x = f32_to_bf16(std::uniform_real_distribution<float>(-3, 3)(rng));
  for (auto& x : f16) x = f32_to_f16(std::uniform_real_distribution<float>(-3, 3)(rng));
  const float scalar = 2.5f;
  std::vector<TensorToWrite> ts = {
      {"b.bf16", DType::BF16, {7, 3}, bf16.data()},  // odd byte count before an f32 tensor
      {"a.f32", DType::F32, {6, 5}, f32.data()},    {"c.f16", DType::F16, {3}, f16.data()},
      {"scalar", DType::F32, {}, &scalar},          {"empty", DType::BF16, {0, 4}, nullptr},
  };
  ASSERT_TRUE(write_safetensors(path("model.safetensors"), ts, {{"format", "pt"}}).ok());

  // The header is padded to 8 bytes with spaces.
  std::ifstream in(path("model.safetensors"), std::ios::binary);
  uint64_t hl = 0;
  in.read(reinterpret_cast<char*>(&hl), 8);
  EXPECT_EQ(hl % 8, 0u);

  auto store = WeightStore::open_dir(dir());
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(store->names().size(), 5u);
  EXPECT_EQ(store->total_bytes(), f32.size() * 4 + bf16.size() * 2 + f16.size() * 2 + 4);

  auto a = store->get("a.f32", {6, 5});
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ((*a)->dtype, DType::F32);
  EXPECT_EQ((*a)->bytes, f32.size() * 4);
  EXPECT_EQ(std::memcmp((*a)->data, f32.data(), f32.size() * 4), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*a)->data) % 4, 0u);

  auto b = store->get("b.bf16", {7, 3});
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ((*b)->dtype, DType::BF16);
  EXPECT_EQ(std::memcmp((*b)->data, bf16.data(), bf16.size() * 2), 0);
  std::vector<float> back(bf16.size());
  convert_to_f32(DType::BF16, (*b)->data, back.data(), back.size());
  EXPECT_EQ(back[4], bf16_to_f32(bf16[4]));

  auto c = store->get("c.f16", {3});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ((*c)->dtype, DType::F16);
  EXPECT_EQ(std::memcmp((*c)->data, f16.data(), f16.size() * 2), 0);

  auto s = store->get("scalar", {});
  ASSERT_TRUE(s.ok()) << s.message();
  float sv;
  std::memcpy(&sv, (*s)->data, 4);
  EXPECT_EQ(sv, 2.5f);
  ASSERT_TRUE(store->get("empty", {0, 4}).ok());
  EXPECT_EQ(store->find("empty")->bytes, 0u);
  EXPECT_EQ(store->find("nope"), nullptr);

  auto file = SafetensorsFile::open(path("model.safetensors"));
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
}

TEST_F(SafetensorsTest, ShardsViaIndex) {
  std::vector<float> x(4, 1.f), y(6, 2.f), z(2, 3.f);
  ASSERT_TRUE(
      write_safetensors(path("model-00001-of-00002.safetensors"),
                        {{"x", DType::F32, {4}, x.data()}, {"y", DType::F32, {2, 3}, y.data()}})
          .ok());
  ASSERT_TRUE(write_safetensors(path("model-00002-of-00002.safetensors"),
                                {{"z", DType::F32, {2}, z.data()}})
                  .ok());
  write_bytes(path("model.safetensors.index.json"),
              R"({"metadata": {"total_size": 48}, "weight_map": {
                 "x": "model-00001-of-00002.safetensors", "y": "model-00001-of-00002.safetensors",
                 "z": "model-00002-of-00002.safetensors"}})");
  auto store = WeightStore::open_dir(dir());
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(store->names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(store->files().size(), 2u);
  auto z_t = store->get("z", {2});
  ASSERT_TRUE(z_t.ok()) << z_t.message();
  EXPECT_NE((*z_t)->file.find("model-00002-of-00002.safetensors"), std::string::npos);
  EXPECT_EQ(static_cast<const float*>((*z_t)->data)[1], 3.f);

  // A shard named in weight_map that is not there.
  write_bytes(path("model.safetensors.index.json"),
              R"({"weight_map": {"x": "model-00001-of-00002.safetensors",
                                 "w": "model-00003-of-00003.safetensors"}})");
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "model.safetensors.index.json",
                   "\"model-00003-of-00003.safetensors\"", "not found");

  // weight_map places a tensor in a shard that lacks it.
  write_bytes(path("model.safetensors.index.json"),
              R"({"weight_map": {"z": "model-00001-of-00002.safetensors"}})");
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "\"z\"", "does not contain it");

  // Path escape.
  write_bytes(path("model.safetensors.index.json"),
              R"({"weight_map": {"z": "../evil.safetensors"}})");
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "\"../evil.safetensors\"");

  // Missing weight_map.
  write_bytes(path("model.safetensors.index.json"), R"({"metadata": {}})");
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "model.safetensors.index.json",
                   "missing field \"weight_map\"");
}

TEST_F(SafetensorsTest, GlobFallbackAndDuplicates) {
  std::vector<float> x(2, 1.f);
  ASSERT_TRUE(write_safetensors(path("a.safetensors"), {{"x", DType::F32, {2}, x.data()}}).ok());
  ASSERT_TRUE(write_safetensors(path("b.safetensors"), {{"y", DType::F32, {2}, x.data()}}).ok());
  auto store = WeightStore::open_dir(dir());
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(store->names(), (std::vector<std::string>{"x", "y"}));

  ASSERT_TRUE(write_safetensors(path("c.safetensors"), {{"x", DType::F32, {2}, x.data()}}).ok());
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "\"x\"", "a.safetensors", "c.safetensors");
}

TEST_F(SafetensorsTest, EmptyOrMissingFolder) {
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), dir(), "no weights found", "model.safetensors");
  EXPECT_ERROR_HAS(WeightStore::open_dir(path("nope")), "nope", "not a directory");
}

TEST_F(SafetensorsTest, MissingFile) {
  EXPECT_ERROR_HAS(SafetensorsFile::open(path("absent.safetensors")), "absent.safetensors",
                   "cannot open");
}

TEST_F(SafetensorsTest, TruncatedFile) {
  write_bytes(path("model.safetensors"), std::string("\x10\0\0", 3));
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "model.safetensors", "file is 3 bytes",
                   "8-byte header length");
  write_bytes(path("model.safetensors"), "");
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "model.safetensors", "file is 0 bytes");

  // A valid file cut in the middle of its data section.
  std::vector<float> x(16, 1.f);
  ASSERT_TRUE(
      write_safetensors(path("model.safetensors"), {{"x", DType::F32, {16}, x.data()}}).ok());
  fs::resize_file(path("model.safetensors"), fs::file_size(path("model.safetensors")) - 8);
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "model.safetensors", "\"x\"", "[0, 64]",
                   "data section of 56 bytes");
}

TEST_F(SafetensorsTest, HeaderLengthPastEof) {
  std::string img = image("{}", 0, /*pad=*/false);
  img[0] = 100;
  EXPECT_ERROR_HAS(parse_image(img), "x.safetensors", "header length 100", "10 bytes");
  std::string huge = image("{}", 0);
  for (int i = 0; i < 8; ++i) huge[i] = '\xff';
  EXPECT_ERROR_HAS(parse_image(huge), "header length 18446744073709551615", "runs past");
}

TEST_F(SafetensorsTest, InvalidJson) {
  EXPECT_ERROR_HAS(parse_image(image("{\"a\": ", 0)), "x.safetensors", "not valid JSON");
  EXPECT_ERROR_HAS(parse_image(image("[1, 2]", 0)), "x.safetensors", "expected a JSON object",
                   "array");
  EXPECT_ERROR_HAS(parse_image(image("", 0)), "not valid JSON");
  EXPECT_ERROR_HAS(parse_image(image(R"({"__metadata__": {"k": 1}})", 0)), "__metadata__", "\"k\"",
                   "expected a string", "found 1");
}

TEST_F(SafetensorsTest, MissingFields) {
  EXPECT_ERROR_HAS(parse_image(image(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", 4)),
                   "\"t\"", "missing field \"dtype\"");
  EXPECT_ERROR_HAS(parse_image(image(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4)),
                   "\"t\"", "missing field \"shape\"");
  EXPECT_ERROR_HAS(parse_image(image(R"({"t": {"dtype": "F32", "shape": [1]}})", 4)), "\"t\"",
                   "missing field \"data_offsets\"");
  EXPECT_ERROR_HAS(
      parse_image(image(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)),
      "\"t\"", "non-negative", "found -1");
  EXPECT_ERROR_HAS(parse_image(image(R"({"t": 3})", 4)), "\"t\"", "expected an object", "found 3");
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  EXPECT_ERROR_HAS(
      parse_image(image(R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 12)),
      "x.safetensors", "\"t\"", "[0, 16]", "data section of 12 bytes");
  EXPECT_ERROR_HAS(
      parse_image(image(R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 12)),
      "\"t\"", "not ordered");
  EXPECT_ERROR_HAS(
      parse_image(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                        16)),
      "\"a\"", "\"b\"", "overlap");
  // Offsets near 2^64 must not wrap.
  EXPECT_ERROR_HAS(parse_image(image(R"({"t": {"dtype": "F32", "shape": [4],
      "data_offsets": [18446744073709551608, 8]}})",
                                     16)),
                   "\"t\"");
}

TEST_F(SafetensorsTest, SizeMismatch) {
  EXPECT_ERROR_HAS(
      parse_image(
          image(R"({"t": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, 16]}})", 16)),
      "x.safetensors", "\"t\"", "hold 16 bytes", "expected 12", "[3, 2] BF16");
  // numel * 4 overflows 64 bits.
  EXPECT_ERROR_HAS(parse_image(image(R"({"t": {"dtype": "F32",
      "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})",
                                     0)),
                   "\"t\"", "overflows");
  EXPECT_ERROR_HAS(parse_image(image(R"({"t": {"dtype": "F32",
      "shape": [4611686018427387904], "data_offsets": [0, 0]}})",
                                     0)),
                   "\"t\"", "overflows");
}

TEST_F(SafetensorsTest, UnsupportedDtypes) {
  for (const char* dt : {"F64", "I8", "U8", "I16", "U16", "F8_E5M2", "BOOL", "whatever"}) {
    std::string h =
        std::string(R"({"x": {"dtype": ")") + dt + R"(", "shape": [1], "data_offsets": [0, 1]}})";
    EXPECT_ERROR_HAS(parse_image(image(h, 8), "model.safetensors"),
                     std::string("model.safetensors: tensor \"x\" has dtype ") + dt +
                         "; syv supports F32, F16, BF16");
  }
  // The writer can produce a U8 tensor; the reader refuses it by name.
  uint8_t v[2] = {1, 2};
  ASSERT_TRUE(write_safetensors(path("model.safetensors"), {{"ids", DType::U8, {2}, v}}).ok());
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir()), "model.safetensors: tensor \"ids\" has dtype U8");
}

TEST_F(SafetensorsTest, QuantizedCheckpointDtypesAreRead) {
  // The storage of pre-quantized checkpoints (fp8 weights, packed int4 words, weight_shape).
  const int32_t words[2] = {0x76543210, -1};
  const int64_t shape[2] = {8, 16};
  const uint8_t fp8[2] = {0x38, 0xB0};
  ASSERT_TRUE(write_safetensors(path("model.safetensors"), {{"q", DType::I32, {2}, words},
                                                            {"s", DType::I64, {2}, shape},
                                                            {"w", DType::F8E4M3, {2}, fp8}})
                  .ok());
  auto store = WeightStore::open_dir(dir());
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(store->find("q")->dtype, DType::I32);
  EXPECT_EQ(store->find("s")->dtype, DType::I64);
  EXPECT_EQ(store->find("w")->dtype, DType::F8E4M3);
  EXPECT_EQ(std::memcmp(store->find("q")->data, words, sizeof words), 0);
}

TEST_F(SafetensorsTest, MisalignedTensorRefused) {
  // Header of 2 bytes + a BF16 tensor at data offset 1 -> file byte 11.
  EXPECT_ERROR_HAS(
      parse_image(image(R"({"t": {"dtype": "BF16", "shape": [1], "data_offsets": [1, 3]}})", 8)),
      "\"t\"", "not aligned");
}

TEST_F(SafetensorsTest, WrongShapeAndMissingTensor) {
  std::vector<uint16_t> w(512 * 96);
  ASSERT_TRUE(
      write_safetensors(path("model.safetensors"),
                        {{"model.layers.3.mlp.up_proj.weight", DType::BF16, {512, 96}, w.data()}})
          .ok());
  auto store = WeightStore::open_dir(dir());
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_ERROR_HAS(store->get("model.layers.3.mlp.up_proj.weight", {320, 96}),
                   "model.safetensors: tensor \"model.layers.3.mlp.up_proj.weight\" has shape "
                   "[512, 96], config expects [320, 96]");
  EXPECT_ERROR_HAS(store->get("model.layers.3.mlp.down_proj.weight", {96, 512}),
                   dir() + ": missing tensor \"model.layers.3.mlp.down_proj.weight\"");
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  float x = 1;
  EXPECT_ERROR_HAS(write_safetensors(path("w.safetensors"),
                                     {{"a", DType::F32, {1}, &x}, {"a", DType::F32, {1}, &x}}),
                   "duplicate tensor \"a\"");
  EXPECT_ERROR_HAS(write_safetensors(path("w.safetensors"), {{"a", DType::F32, {2}, nullptr}}),
                   "\"a\"", "no data");
  EXPECT_ERROR_HAS(
      write_safetensors(path("no/such/dir/w.safetensors"), {{"a", DType::F32, {1}, &x}}),
      "no/such/dir/w.safetensors");
}

// safetensors_layout() is the writer's layout without the data: writing the data at its offsets
// gives the same bytes as write_safetensors.
TEST_F(SafetensorsTest, LayoutIsTheWritersLayout) {
  std::vector<float> a(5, 1.5f);
  std::vector<uint16_t> b(6, 0x3f80), c(3, 0x4000);
  const std::vector<TensorToWrite> tensors = {{"b", DType::BF16, {2, 3}, b.data()},
                                              {"a", DType::F32, {5}, a.data()},
                                              {"c", DType::F16, {3}, c.data()},
                                              {"empty", DType::BF16, {0, 4}, nullptr}};
  ASSERT_TRUE(write_safetensors(path("w.safetensors"), tensors, {{"format", "pt"}}).ok());
  std::ifstream in(path("w.safetensors"), std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  auto layout = safetensors_layout(path("w.safetensors"), tensors, {{"format", "pt"}});
  ASSERT_TRUE(layout.ok()) << layout.message();
  ASSERT_EQ(layout->file_size, written.size());
  ASSERT_EQ(layout->offsets.size(), tensors.size());
  std::string rebuilt(layout->file_size, '\0');
  rebuilt.replace(0, layout->prefix.size(), layout->prefix);
  EXPECT_EQ(layout->prefix.size() % 8, 0u);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(layout->offsets[i] % dtype_size(tensors[i].dtype), 0u) << tensors[i].name;
    if (tensors[i].bytes() > 0)
      rebuilt.replace(layout->offsets[i], tensors[i].bytes(),
                      static_cast<const char*>(tensors[i].data), tensors[i].bytes());
  }
  EXPECT_TRUE(rebuilt == written);
  // The layout ignores data pointers; it refuses what the writer refuses, naming the file.
  EXPECT_TRUE(safetensors_layout(path("x"), {{"a", DType::F32, {4}, nullptr}}).ok());
  EXPECT_ERROR_HAS(safetensors_layout(path("x.safetensors"), {{"a", DType::F32, {1}, nullptr},
                                                              {"a", DType::F32, {1}, nullptr}}),
                   "x.safetensors", "duplicate tensor \"a\"");
  EXPECT_ERROR_HAS(safetensors_layout(path("x.safetensors"), {{"a", DType::F32, {-1}, nullptr}}),
                   "negative shape [-1]");
}

// The fixtures committed under tests/fixtures were written by the Python safetensors library.
TEST(SafetensorsFixtures, ReferenceFilesOpen) {
  const std::string root = SYV_SOURCE_DIR "/tests/fixtures";
  int opened = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
    if (e.path().filename() != "model.safetensors") continue;
    auto store = WeightStore::open_dir(e.path().parent_path().string());
    ASSERT_TRUE(store.ok()) << store.message();
    EXPECT_GT(store->names().size(), 0u);
    for (const auto& n : store->names()) {
      const TensorInfo* t = store->find(n);
      EXPECT_EQ(static_cast<int64_t>(t->bytes),
                t->numel() * static_cast<int64_t>(dtype_size(t->dtype)));
    }
    ++opened;
  }
  if (opened == 0) GTEST_SKIP() << "no fixtures under " << root;
}

}  // namespace
}  // namespace syv
