#include "cli/openai_client.h"

#include <httplib.h>
#include <strings.h>

#include <chrono>

namespace syv::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

std::string HttpReply::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
  return "";
}

Result<OpenAiClient> OpenAiClient::create(const std::string& url, const std::string& api_key) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos ||
      (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0))
    return Status::Error("--url: expected http://HOST:PORT or https://HOST:PORT, found \"" + url +
                         "\"");
  OpenAiClient c;
  const size_t path = url.find('/', scheme + 3);
  c.base_ = url.substr(0, path);
  c.prefix_ = path == std::string::npos ? "" : url.substr(path);
  while (!c.prefix_.empty() && c.prefix_.back() == '/') c.prefix_.pop_back();
  if (c.prefix_.size() >= 3 && c.prefix_.compare(c.prefix_.size() - 3, 3, "/v1") == 0)
    c.prefix_.resize(c.prefix_.size() - 3);
  if (c.base_.size() <= scheme + 3) return Status::Error("--url: no host in \"" + url + "\"");
  c.key_ = api_key;
  return c;
}

namespace {

httplib::Headers auth_headers(const std::string& key) {
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  return h;
}

HttpReply to_reply(const httplib::Result& res) {
  HttpReply r;
  if (!res) {
    r.error = httplib::to_string(res.error());
    return r;
  }
  r.status = res->status;
  r.body = res->body;
  for (const auto& [k, v] : res->headers) r.headers.emplace_back(k, v);
  return r;
}

}  // namespace

HttpReply OpenAiClient::get(const std::string& path, std::optional<std::string> key) const {
  httplib::Client cli(base_);
  cli.set_read_timeout(timeout_s_, 0);
  return to_reply(cli.Get((prefix_ + path).c_str(), auth_headers(key.value_or(key_))));
}

HttpReply OpenAiClient::post(const std::string& path, const nlohmann::json& body,
                             std::optional<std::string> key) const {
  httplib::Client cli(base_);
  cli.set_read_timeout(timeout_s_, 0);
  return to_reply(cli.Post((prefix_ + path).c_str(), auth_headers(key.value_or(key_)), body.dump(),
                           "application/json"));
}

StreamReply OpenAiClient::stream(const std::string& path, const nlohmann::json& body,
                                 int stop_after) const {
  StreamReply out;
  httplib::Client cli(base_);
  cli.set_read_timeout(timeout_s_, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = prefix_ + path;
  req.headers = auth_headers(key_);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  req.body = body.dump();
  std::string error_body;
  SseReader reader(&out);
  int status = 0;
  bool stopped = false;
  const Clock::time_point t0 = Clock::now();
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, n);
      return true;
    }
    const size_t outputs = reader.feed(std::string_view(data, n), seconds_since(t0));
    if (stop_after > 0 && outputs >= static_cast<size_t>(stop_after)) {
      stopped = true;
      return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = cli.send(req, res, err);
  out.e2e = seconds_since(t0);
  out.status = status != 0 ? status : res.status;
  if (stopped) return out;
  if (!ok) {
    out.error = httplib::to_string(err);
  } else if (out.status != 200) {
    out.error = error_body.empty() ? res.body : error_body;
  } else {
    reader.finish();
  }
  return out;
}

Result<std::string> served_model(const OpenAiClient& client) {
  const HttpReply r = client.get("/v1/models");
  if (r.status != 200)
    return Status::Error("GET /v1/models: " + (r.status == 0 ? r.error
                                                             : "HTTP " + std::to_string(r.status) +
                                                                   ": " + r.body.substr(0, 200)));
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    return Status::Error("GET /v1/models: no model in " + r.body.substr(0, 200));
  return j["data"][0]["id"].get<std::string>();
}

}  // namespace syv::cli
