#!/usr/bin/env python3
"""Smoke test for the server started by ci/local-model/start.

Usage: ci/local-model/smoke.py [URL]   (URL defaults to $CTXBENCH_LLAMA_URL,
e.g. http://127.0.0.1:PORT/v1). Standard library only.

Checks GET /models, a short chat completion (with usage fields), the
context-overflow error, and measures latency and prompt throughput.
Prints a JSON report on stdout; exits non-zero if a check fails.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request


def call(method, url, body=None, timeout=300):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    dt = time.monotonic() - t0
    return status, raw.decode(), dt


def main():
    url = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CTXBENCH_LLAMA_URL", "")).rstrip("/")
    if not url:
        sys.exit("usage: smoke.py URL  (or set CTXBENCH_LLAMA_URL)")
    root = url[:-3] if url.endswith("/v1") else url
    report, failures = {"url": url}, []

    st, body, _ = call("GET", url + "/models")
    report["models"] = {"status": st, "body": json.loads(body)}
    if st != 200:
        failures.append("GET /models")

    chat = {"model": "smollm2", "messages": [{"role": "user", "content": "Say hi"}],
            "max_tokens": 16, "temperature": 0}
    call("POST", url + "/chat/completions", chat)  # warm-up
    lat = []
    for _ in range(3):
        st, body, dt = call("POST", url + "/chat/completions", chat)
        lat.append(dt)
    j = json.loads(body)
    report["short_chat"] = {"status": st, "latency_s": [round(x, 3) for x in lat],
                            "content": j.get("choices", [{}])[0].get("message", {}).get("content"),
                            "usage": j.get("usage"), "timings": j.get("timings"), "model": j.get("model")}
    if st != 200 or "prompt_tokens" not in (j.get("usage") or {}):
        failures.append("short chat completion")

    # Prompt throughput: ~2000-token prompt, 1 output token.
    text = " ".join(f"item{i} is blue." for i in range(400))
    st, body, dt = call("POST", url + "/chat/completions",
                        {"model": "smollm2", "max_tokens": 1, "temperature": 0,
                         "messages": [{"role": "user", "content": text}], "cache_prompt": False})
    j = json.loads(body)
    report["prompt_throughput"] = {"status": st, "wall_s": round(dt, 3), "usage": j.get("usage"),
                                   "timings": j.get("timings")}

    # Context overflow: a prompt well above the context size.
    text = " ".join(f"word{i}" for i in range(6000))
    st_tok, tok_body, _ = call("POST", root + "/tokenize", {"content": text})
    n_tok = len(json.loads(tok_body).get("tokens", [])) if st_tok == 200 else None
    st, body, dt = call("POST", url + "/chat/completions",
                        {"model": "smollm2", "max_tokens": 16, "temperature": 0,
                         "messages": [{"role": "user", "content": text}]})
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    report["overflow"] = {"prompt_tokens_via_tokenize": n_tok, "status": st, "wall_s": round(dt, 3),
                          "body_raw": body, "body": parsed}
    if st < 400:
        failures.append("overflow request did not fail")

    st, body, _ = call("GET", root + "/health")
    report["health_after"] = {"status": st, "body": body}
    if st != 200:
        failures.append("health after overflow")

    report["failures"] = failures
    print(json.dumps(report, indent=2))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
