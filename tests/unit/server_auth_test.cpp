#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "server/auth.h"

namespace syv::server {
namespace {

TEST(ServerAuth, DenyByDefault) {
  ApiKeys keys;
  EXPECT_FALSE(keys.matches(""));
  EXPECT_FALSE(keys.matches("anything"));
  EXPECT_FALSE(keys.is_public("/health"));
}

TEST(ServerAuth, SeveralKeysMatchExactly) {
  ApiKeys keys;
  ASSERT_TRUE(keys.add("sk-first-key-123").ok());
  ASSERT_TRUE(keys.add("sk-second-key-456").ok());
  EXPECT_TRUE(keys.matches("sk-first-key-123"));
  EXPECT_TRUE(keys.matches("sk-second-key-456"));
  EXPECT_FALSE(keys.matches("sk-first-key-12"));
  EXPECT_FALSE(keys.matches("sk-first-key-1234"));
  EXPECT_FALSE(keys.matches("SK-FIRST-KEY-123"));
  EXPECT_FALSE(keys.matches(""));
  // find(): which key (the access log's "key #<index + 1>"), or -1.
  ASSERT_TRUE(keys.add("sk-third-key-789").ok());
  EXPECT_EQ(keys.find("sk-first-key-123"), 0);
  EXPECT_EQ(keys.find("sk-second-key-456"), 1);
  EXPECT_EQ(keys.find("sk-third-key-789"), 2);
  EXPECT_EQ(keys.find("sk-third-key-78"), -1);
  EXPECT_EQ(keys.find(""), -1);
}

TEST(ServerAuth, RefusesBadKeys) {
  ApiKeys keys;
  EXPECT_FALSE(keys.add("").ok());
  EXPECT_FALSE(keys.add("has space").ok());
  EXPECT_FALSE(keys.add("tab\tkey").ok());
  EXPECT_TRUE(keys.empty());
}

TEST(ServerAuth, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("ab", "abc"));
  EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), "a"));
}

TEST(ServerAuth, ExtractsBearerAndXApiKey) {
  EXPECT_EQ(extract_api_key("Bearer sk-1", ""), "sk-1");
  EXPECT_EQ(extract_api_key("bearer   sk-2  ", ""), "sk-2");
  EXPECT_EQ(extract_api_key("", "sk-3"), "sk-3");
  EXPECT_EQ(extract_api_key("Basic abc", "sk-4"), "sk-4");
  EXPECT_EQ(extract_api_key("Bearer", ""), "");
  EXPECT_EQ(extract_api_key("", ""), "");
}

TEST(ServerAuth, MaskNeverShowsWholeKey) {
  const std::string key = "sk-syv-0123456789abcdef0123";
  const std::string masked = mask_key(key);
  EXPECT_EQ(masked.find(key), std::string::npos);
  EXPECT_EQ(masked, "sk-s...0123");
  EXPECT_EQ(mask_key("short"), "****");
}

TEST(ServerAuth, GeneratedKeysAreRandomAndValid) {
  auto a = generate_api_key();
  auto b = generate_api_key();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->rfind("sk-syv-", 0), 0u);
  EXPECT_EQ(a->size(), 7u + 40u);
  ApiKeys keys;
  EXPECT_TRUE(keys.add(*a).ok());
}

TEST(ServerAuth, KeyFile) {
  const std::string path = ::testing::TempDir() + "/syv_keys.txt";
  {
    std::ofstream out(path);
    out << "# comment\n\nsk-from-file-1\n  sk-from-file-2  \n";
  }
  ApiKeys keys;
  ASSERT_TRUE(keys.add_file(path).ok());
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_TRUE(keys.matches("sk-from-file-2"));
  {
    std::ofstream out(path);
    out << "# only a comment\n";
  }
  ApiKeys empty;
  Status st = empty.add_file(path);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos);
  EXPECT_FALSE(empty.add_file(path + ".missing").ok());
  std::remove(path.c_str());
}

TEST(ServerAuth, PublicRoutes) {
  ApiKeys keys;
  ASSERT_TRUE(keys.add_public_routes("/health,/metrics").ok());
  EXPECT_TRUE(keys.is_public("/health"));
  EXPECT_TRUE(keys.is_public("/metrics"));
  EXPECT_FALSE(keys.is_public("/health/"));
  EXPECT_FALSE(keys.is_public("/v1/models"));
  ApiKeys bad;
  EXPECT_FALSE(bad.add_public_routes("/health,,/x").ok());
  EXPECT_FALSE(bad.add_public_routes("health").ok());
}

TEST(ServerAuth, Loopback) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
  EXPECT_FALSE(is_loopback_host("127.0.0.1.evil.com"));
  EXPECT_FALSE(is_loopback_host("::"));
}

}  // namespace
}  // namespace syv::server
