#!/usr/bin/env bash
# Installs the Debian 12 packages syv needs that are not installed yet (idempotent, fast when done).
# --test adds what only the tests need: chromium, for the chat page's headless browser test
# (tests/e2e/webui_browser, driven by puppeteer-core).
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config ccache clang libclang-rt-14-dev
  nlohmann-json3-dev libcpp-httplib-dev libboost-dev zlib1g-dev libpcre2-dev libutf8proc-dev libxxhash-dev
  libopenblas-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev nodejs npm curl)
if [[ "${1:-}" == "--test" ]]; then packages+=(chromium); fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# Node and npm may come from outside Debian (e.g. nodesource); accept any working ones.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]:-}"
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
