#!/usr/bin/env python3
"""Drives a hostile-client suite against a running `syv serve` on loopback and prints the server's
resident memory (VmRSS) after each phase, so the memory a hostile suite leaves behind is measured
(docs/server.md "Limits": the figures). Bounded: every phase has a fixed count and deadline.

  tools/bench/hostile_suite.py --port 8080 --key KEY --pid PID [--rounds 3]

Start the server with --host-cache-gb 0 (the host tier's pages are resident memory by design) and
--accept-compressed (so the gzip bomb is inflated, up to the body limit, with a key).

Phases: deep JSON (10^5 levels at 8 positions), wide JSON (5 MB of 420,000 small objects: past
--max-json-values, and 262,000 `{}`: just under its default), malformed
bodies and framing (200), a header flood, a 1 GiB gzip bomb, 300 slow connections held while
authenticated requests are timed, then a plain request."""
import argparse
import gzip
import json
import socket
import time


def rss_mb(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def request(port, method, path, key, body=b"", headers=None, timeout=30.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if key:
        head += f"Authorization: Bearer {key}\r\n"
    for k, v in (headers or {}).items():
        head += f"{k}: {v}\r\n"
    if method == "POST" and "Content-Length" not in (headers or {}):
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    try:
        s.sendall(head.encode() + b"\r\n" + body)
    except OSError:
        pass
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else -1
    return status, data


def nest(depth, inner='"x"'):
    return "[" * depth + inner + "]" * depth


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    port, key, pid = a.port, a.key, a.pid
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    print(f"start: {rss_mb(pid):.0f} MB")
    for r in range(a.rounds):
        statuses = {}

        def count(st):
            statuses[st] = statuses.get(st, 0) + 1

        d = 100000
        deep = [
            ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "x", "x": %s}]}' % nest(d)),
            ("/v1/chat/completions", '{"messages": [{"role": "user", "content": %s}]}' % nest(d)),
            ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": %s}}]}' % nest(d, "{}")),
            ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"k": %s}}' % nest(d)),
            ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": nest(d)}}]}]})),
            ("/tokenize", '{"messages": [{"role": "user", "content": %s}]}' % nest(d)),
            ("/v1/completions", '{"prompt": %s}' % nest(d)),
            ("/detokenize", '{"tokens": %s}' % nest(d)),
        ]
        for path, body in deep:
            count(request(port, "POST", path, key, body.encode())[0])
        print(f"round {r}: deep JSON {dict(statuses)}: {rss_mb(pid):.0f} MB")
        statuses.clear()
        wide = json.dumps({"messages": [{"role": "user", "content": "x", "x": [{"a": i} for i in range(420000)]}], "max_tokens": 2})
        at_limit = json.dumps({"messages": [{"role": "user", "content": "x", "x": [{}] * 262000}], "max_tokens": 2})
        for _ in range(3):
            count(request(port, "POST", "/v1/chat/completions", key, wide.encode())[0])
            count(request(port, "POST", "/v1/chat/completions", key, at_limit.encode())[0])
        print(f"round {r}: wide JSON ({len(wide) >> 20} MB, {len(at_limit) >> 10} KB) {dict(statuses)}: {rss_mb(pid):.0f} MB")
        statuses.clear()
        bad = [b"{", b"[1,2]", b"", b'{"messages": 5}', b'{"prompt": "x", "max_tokens": 2147483647}',
               b'{"prompt": "x", "temperature": "hot"}', b"\xff\xfe", b'{"prompt": [1, 99999999]}']
        for i in range(200):
            count(request(port, "POST", "/v1/completions", key, bad[i % len(bad)])[0])
        for cl in ["-1", "1e30", "5, 5", "99999999999999999999999"]:
            count(request(port, "POST", "/v1/completions", key, b"", {"Content-Length": cl})[0])
        print(f"round {r}: malformed {dict(statuses)}: {rss_mb(pid):.0f} MB")
        statuses.clear()
        flood = {f"X-{i}": "y" for i in range(100000)}
        count(request(port, "GET", "/health", key, b"", flood)[0])
        bomb = gzip.compress(b"\0" * (1 << 30), 1)
        for k in ("", key):
            count(request(port, "POST", "/v1/chat/completions", k, bomb, {"Content-Encoding": "gzip", "Content-Length": str(len(bomb))})[0])
        print(f"round {r}: header flood + gzip bomb {dict(statuses)}: {rss_mb(pid):.0f} MB")
        slow = []
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 1")
            slow.append(s)
        worst = 0.0
        for _ in range(5):
            for s in slow:
                try:
                    s.send(b"2")
                except OSError:
                    pass
            t0 = time.monotonic()
            st, _ = request(port, "POST", "/v1/chat/completions", key, json.dumps(chat).encode())
            worst = max(worst, time.monotonic() - t0)
            assert st == 200, st
            time.sleep(0.3)
        for s in slow:
            s.close()
        print(f"round {r}: 300 slow connections, slowest authenticated answer {worst * 1000:.0f} ms: {rss_mb(pid):.0f} MB")
    time.sleep(2)
    st, _ = request(port, "POST", "/v1/chat/completions", key, json.dumps(chat).encode())
    print(f"end (a plain request: {st}): {rss_mb(pid):.0f} MB; peak (VmHWM) {rss_mb(pid, 'VmHWM'):.0f} MB")


if __name__ == "__main__":
    main()
