#!/usr/bin/env bash
# Starts the main job on a model folder. Until the HTTP server lands this runs `syv generate`.
set -euo pipefail
syv=$1; model=$2; port=$3
if "$syv" serve --help >/dev/null 2>&1; then
  exec "$syv" serve --model "$model" --port "$port"
fi
exec "$syv" generate --model "$model" --prompt "Hello from syv" --max-tokens 16
