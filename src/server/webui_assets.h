// The chat page (src/server/webui/), embedded at build time: tools/embed_files.cmake turns the
// files into a generated source file that defines webui_assets(). The page is plain HTML, CSS and
// JavaScript; it fetches nothing from the internet and calls /v1/* with the key the user types.
#pragma once

#include <span>
#include <string_view>

namespace syv::server {

struct WebUiAsset {
  std::string_view path;  // the route: "/" for index.html, "/ui/<file>" for the others
  std::string_view
      content_type;       // from the file's extension, e.g. "text/javascript; charset=utf-8"
  std::string_view body;  // the file's bytes, static storage
};

// Every file of the page; the spans and views stay valid for the life of the program.
std::span<const WebUiAsset> webui_assets();

}  // namespace syv::server
