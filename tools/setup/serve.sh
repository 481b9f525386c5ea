#!/usr/bin/env bash
# `make serve`: runs the OpenAI-compatible server on a model folder. The server prints its URL and
# the API key (a random one for this run unless SYV_API_KEY is set) once it is listening.
# Extra flags for `syv serve` can be passed in SYV_SERVE_ARGS (e.g. "--public-routes /health").
set -euo pipefail
syv=$1; model=$2; port=$3
args=(serve --model "$model" --port "$port")
# SYV_API_KEY / SYV_API_KEY_FILE reach `syv serve` through the environment (not argv: `ps` shows
# argv to every user).
# shellcheck disable=SC2206
if [[ -n "${SYV_SERVE_ARGS:-}" ]]; then args+=(${SYV_SERVE_ARGS}); fi
exec "$syv" "${args[@]}"
