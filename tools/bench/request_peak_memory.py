#!/usr/bin/env python3
"""Peak resident memory (VmHWM) of `syv serve` while it answers one large JSON request body.

Starts the server itself (CPU, loopback, a fixed key, --host-cache-gb 0), waits until it is ready,
reads VmHWM, sends one body, reads VmHWM again, and prints both with the answer's status. One
server per body shape: VmHWM only grows, so each shape gets a fresh process.

  tools/bench/request_peak_memory.py --syv build/dev/syv --model build/dev/e2e-demo-model \
      [--shape wide|empty-objects|numbers|strings|all] [--values N] [-- extra serve flags]

Shapes (each is one chat request whose first message carries an extra field "x", which reaches
the chat template): wide = 420,000 objects {"a": i} (~5 MB, the case of docs/server.md "Memory");
empty-objects / numbers / strings = N values of {}, 0 or "" (the cheapest bytes per value)."""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

KEY = "sk-peak-memory-0123456789"


def vm(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def post(port, path, body, timeout=300.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    s.sendall(head.encode() + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else -1
    return status, data.split(b"\r\n\r\n", 1)[-1]


def body_for(shape, n):
    item = {"wide": None, "empty-objects": {}, "numbers": 0, "strings": ""}[shape]
    xs = [{"a": i} for i in range(420000)] if shape == "wide" else [item] * n
    return json.dumps({"messages": [{"role": "user", "content": "x", "x": xs}], "max_tokens": 2},
                      separators=(",", ":")).encode()


def measure(args, shape):
    cmd = [args.syv, "serve", "--model", args.model, "--port", "0", "--device", "cpu",
           "--api-key", KEY, "--host-cache-gb", "0", "--max-model-len", "512",
           "--kv-cache-mb", "32"] + args.extra
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        for line in p.stdout:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            sys.exit("syv serve did not start")
        os.set_blocking(p.stdout.fileno(), False)
        for _ in range(600):
            try:
                st, _ = post(port, "/tokenize", b'{"prompt": "hi"}', timeout=5)
                if st == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        body = body_for(shape, args.values)
        before = vm(p.pid, "VmHWM")
        t0 = time.monotonic()
        status, answer = post(port, "/v1/chat/completions", body)
        took = time.monotonic() - t0
        after = vm(p.pid, "VmHWM")
        rss = vm(p.pid, "VmRSS")
        note = ""
        if status != 200:
            note = " " + json.loads(answer)["error"]["message"][:160]
        print(f"{shape}: body {len(body) / 1e6:.1f} MB -> {status} in {took:.1f} s; VmHWM "
              f"{before:.0f} -> {after:.0f} MB (+{after - before:.0f}), VmRSS after {rss:.0f} MB"
              f"{note}", flush=True)
    finally:
        p.terminate()
        p.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--syv", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--shape", default="wide",
                    choices=["wide", "empty-objects", "numbers", "strings", "all"])
    ap.add_argument("--values", type=int, default=1000000)
    ap.add_argument("extra", nargs="*", help="more syv serve flags (after --)")
    args = ap.parse_args()
    shapes = ["wide", "empty-objects", "numbers", "strings"] if args.shape == "all" else [args.shape]
    for shape in shapes:
        measure(args, shape)


if __name__ == "__main__":
    main()
