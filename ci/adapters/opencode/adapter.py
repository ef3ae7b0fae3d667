#!/usr/bin/env python3
"""ctxbench.agent/1 adapter for opencode (npm `opencode-ai`), stdlib only.

opencode manages its own context: after a model step whose reported usage passes the
model's usable input (`limit.context` − output reserve − `compaction.reserved`) it runs a
compaction — the `compaction` agent summarizes the session head into a summary message
and keeps a recent tail (`compaction.preserve_recent_tokens`) — and it prunes old tool
outputs (`compaction.prune`). This adapter drives the real program as a client of its
own HTTP server, as opencode's TUI and SDK do:

  start               one `opencode serve` per run on loopback, with a private HOME/XDG
                      tree under session_dir and a config that declares provider
                      `ctxbench` (`@ai-sdk/openai-compatible` at model.base_url, no key) and
                      model `ctxbench/<name>` with the scenario's window and output limit;
                      the scenario's tools as opencode custom tools (one file each under
                      the config dir, exact names) that replay ctxbench's scripted results;
                      opencode's own built-in tools denied
  user_turn           POST /session/<id>/message (the session is created on the first
                      turn and its id kept in session_dir); the reply is the final
                      assistant message's text
  restart             stop the server; the next turn starts it again and continues the
                      same session from opencode's own database under session_dir
  instructions_edited ack: opencode reads AGENTS.md from the workspace for every request
  compact             POST /session/<id>/summarize (dry_run: `unchanged`, no model call)
  shutdown            stop the server; bye (no transcript exported)

Modes: `compact` enables `compaction.auto` and `compaction.prune`; `off` and `warn`
disable both — opencode has no warn-only mode.
The binary is $CTXBENCH_OPENCODE_BIN (printed by ci/adapters/opencode/install).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import scripted_tools  # noqa: E402
import lifeline  # noqa: E402

PROTOCOL = "ctxbench.agent/1"
OPENCODE = os.environ.get("CTXBENCH_OPENCODE_BIN") or shutil.which("opencode") or "opencode"
TURN_TIMEOUT = float(os.environ.get("CTXBENCH_OPENCODE_TURN_TIMEOUT", "300"))
PROVIDER = "ctxbench"

state = {"proc": None, "url": None, "session": None}


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(*a):
    print("[opencode-adapter]", *a, file=sys.stderr, flush=True)


def plugin_module():
    """@opencode-ai/plugin, installed beside the binary by the install script."""
    real = os.path.realpath(OPENCODE)
    d = os.path.dirname(real)
    while d != "/":
        cand = os.path.join(d, "node_modules", "@opencode-ai", "plugin", "dist", "index.js")
        if os.path.exists(cand):
            return cand
        d = os.path.dirname(d)
    raise RuntimeError(f"@opencode-ai/plugin not found above {real} (run ci/adapters/opencode/install)")


def tool_file(t, helper, tools_dir):
    """An opencode custom tool named like the scenario's tool (file name = tool name). Its
    arguments are declared from the JSON schema's properties (strings, numbers, booleans,
    otherwise any JSON); the body asks the shared helper for the next scripted result."""
    props = (t.get("parameters") or {}).get("properties") or {}
    required = set((t.get("parameters") or {}).get("required") or [])
    args = []
    for k, p in props.items():
        ty = {"string": "string()", "number": "number()", "integer": "number()",
              "boolean": "boolean()"}.get((p or {}).get("type"), "any()")
        z = f"tool.schema.{ty}"
        if p.get("description"):
            z += f".describe({json.dumps(p['description'])})"
        if k not in required:
            z += ".optional()"
        args.append(f"    {json.dumps(k)}: {z},")
    py = sys.executable or "python3"
    return f"""import {{ tool }} from {json.dumps(plugin_module())}
import {{ spawnSync }} from "node:child_process"
export default tool({{
  description: {json.dumps(t.get("description") or t["name"])},
  args: {{
{chr(10).join(args)}
  }},
  async execute(args) {{
    const r = spawnSync({json.dumps(py)}, [{json.dumps(helper)}, {json.dumps(tools_dir)}, "call", {json.dumps(t["name"])}],
      {{ input: JSON.stringify(args), encoding: "utf8" }})
    if (r.status !== 0) throw new Error(r.stdout || r.stderr || "tool failed")
    return r.stdout
  }},
}})
"""


def configure(m):
    sd = m["session_dir"]
    home = os.path.join(sd, "opencode-home")
    cfg = os.path.join(sd, "opencode-config")
    tools_dir = os.path.join(sd, "opencode-tools")
    for d in (home, os.path.join(cfg, "tool"), tools_dir):
        os.makedirs(d, exist_ok=True)
    helper = os.path.join(HERE, "..", "common", "scripted_tools.py")
    tools = m.get("tools") or []
    for t in tools:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", t.get("name", "")):
            log(f"skipping tool {t.get('name')!r}: not a file name")
            continue
        with open(os.path.join(cfg, "tool", t["name"] + ".ts"), "w") as f:
            f.write(tool_file(t, helper, tools_dir))
    model, ctx = m["model"], m.get("context") or {}
    compact = m["mode"] == "compact"
    window = int(model["context_window"])
    out = int(model.get("max_output_tokens") or ctx.get("reserved_output_tokens") or 1024)
    # The built-in tools are denied; the scenario's are allowed (later rules win).
    perms = {"*": False}
    perms.update({t["name"]: True for t in tools})
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "lsp": False,
        "formatter": False,
        "provider": {PROVIDER: {
            "npm": "@ai-sdk/openai-compatible",
            "name": "ctxbench",
            "options": {"baseURL": model["base_url"], "apiKey": "ctxbench-no-key"},
            "models": {model["name"]: {"name": model["name"], "tool_call": True,
                                       "limit": {"context": window, "output": out}}},
        }},
        "model": f"{PROVIDER}/{model['name']}",
        "small_model": f"{PROVIDER}/{model['name']}",
        "tools": perms,
        # No session-title request: an auxiliary call outside the conversation (its own
        # system prompt, the first user text) that is not context management.
        "agent": {"title": {"disable": True}},
        "compaction": {
            "auto": compact,
            "prune": compact,
            "reserved": int(ctx.get("buffer_tokens") or 0),
            "preserve_recent_tokens": int(ctx.get("recent_tail_tokens") or 0) or None,
        },
    }
    config["compaction"] = {k: v for k, v in config["compaction"].items() if v is not None}
    path = os.path.join(cfg, "opencode.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=1)
    sid_file = os.path.join(sd, "opencode-session-id")
    state.update(home=home, cfg=cfg, config=path, tools_dir=tools_dir, workspace=m["workspace"],
                 model=model, sid_file=sid_file)


def env():
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("OPENAI_", "ANTHROPIC_", "OPENCODE_", "XDG_"))}
    h = state["home"]
    e.update(HOME=h, XDG_CONFIG_HOME=os.path.join(h, ".config"), XDG_DATA_HOME=os.path.join(h, ".data"),
             XDG_CACHE_HOME=os.path.join(h, ".cache"), XDG_STATE_HOME=os.path.join(h, ".state"),
             OPENCODE_CONFIG=state["config"], OPENCODE_CONFIG_DIR=state["cfg"],
             OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1",
             OPENCODE_DISABLE_LSP_DOWNLOAD="1", OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
             OPENCODE_DISABLE_SHARE="1", OPENCODE_DISABLE_CLAUDE_CODE="1", NO_COLOR="1")
    return e


def start_server():
    p = subprocess.Popen([OPENCODE, "serve", "--hostname", "127.0.0.1", "--port", "0"],
                         cwd=state["workspace"], env=env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    tail = []
    url = None
    deadline = time.time() + 120
    for line in p.stdout:
        tail.append(line)
        mm = re.search(r"listening on (http://\S+)", line)
        if mm:
            url = mm.group(1).rstrip("/")
            break
        if time.time() > deadline:
            break
    if not url:
        p.kill()
        raise RuntimeError("opencode serve did not start: " + "".join(tail)[-1500:])

    def drain():
        for line in p.stdout:
            tail.append(line)
            del tail[:-40]

    threading.Thread(target=drain, daemon=True).start()
    state.update(proc=p, url=url, tail=tail)
    if state["session"] is None and os.path.exists(state["sid_file"]):
        with open(state["sid_file"]) as f:
            state["session"] = f.read().strip() or None


def stop_server():
    p = state.get("proc")
    if p is not None:
        p.terminate()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    state.update(proc=None, url=None)


def http(method, path, body=None, timeout=TURN_TIMEOUT):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(state["url"] + path, data=data, method=method,
                                 headers={"content-type": "application/json",
                                          "x-opencode-directory": state["workspace"]})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        raw = r.read()
    return json.loads(raw) if raw.strip() else None


def ensure():
    if state["proc"] is None or state["proc"].poll() is not None:
        start_server()
    if state["session"] is None:
        s = http("POST", "/session", {})
        state["session"] = s["id"]
        with open(state["sid_file"], "w") as f:
            f.write(s["id"])


def model_ref():
    return {"providerID": PROVIDER, "modelID": state["model"]["name"]}


def text_of(msg):
    return "\n".join(p.get("text", "") for p in (msg or {}).get("parts", [])
                     if p.get("type") == "text" and not p.get("synthetic")).strip()


def classify(err):
    detail = json.dumps(err)[-2000:] if not isinstance(err, str) else err[-2000:]
    name = err.get("name", "") if isinstance(err, dict) else ""
    if "ContextOverflow" in name or re.search(r"context.length|maximum context|context_length_exceeded|too long", detail, re.I):
        return {"status": "failed", "reason": "provider_overflow", "detail": detail}
    if re.search(r"ECONNREFUSED|Unable to connect|timed out|fetch failed", detail, re.I):
        return {"status": "errored", "detail": detail}
    return {"status": "failed", "reason": "provider_rejected", "detail": detail}


def user_turn(m):
    scripted_tools.set_turn(state["tools_dir"], m.get("tools_index"))
    try:
        ensure()
        r = http("POST", f"/session/{state['session']}/message",
                 {"parts": [{"type": "text", "text": m["text"]}], "model": model_ref()})
    except urllib.error.HTTPError as e:
        return classify(f"HTTP {e.code}: {e.read().decode(errors='replace')}")
    except (OSError, RuntimeError) as e:
        return {"status": "errored", "detail": f"{e}; {''.join(state.get('tail', []))[-800:]}"}
    info = (r or {}).get("info") or {}
    if info.get("error"):
        return classify(info["error"])
    return {"status": "completed", "reply": text_of(r)}


def compact(m):
    if m.get("dry_run"):
        return {"outcome": "unchanged", "reason": "dry_run"}
    if state["session"] is None and not os.path.exists(state["sid_file"]):
        return {"outcome": "unchanged", "reason": "nothing_to_compact"}
    try:
        ensure()
        before = http("GET", f"/session/{state['session']}/message")
        http("POST", f"/session/{state['session']}/summarize", dict(model_ref(), auto=False))
        after = http("GET", f"/session/{state['session']}/message")
    except urllib.error.HTTPError as e:
        return {"outcome": "failed", "reason": "summarizer_failed",
                "detail": f"HTTP {e.code}: {e.read().decode(errors='replace')[-1500:]}"}
    except (OSError, RuntimeError) as e:
        return {"outcome": "failed", "reason": "summarizer_failed", "detail": str(e)}
    summaries = [x for x in after if (x.get("info") or {}).get("summary")]
    if len(summaries) <= len([x for x in before if (x.get("info") or {}).get("summary")]):
        return {"outcome": "unchanged", "reason": "nothing_to_compact"}
    last = summaries[-1]["info"]
    if last.get("error"):
        return {"outcome": "failed", "reason": "summarizer_failed", "detail": json.dumps(last["error"])[-1500:]}
    return {"outcome": "compacted", "checkpoint_id": last.get("id", "opencode"), "reclaimed_tokens": 0}


def main():
    lifeline.watch()  # die with ctxbench, even mid-turn
    # ctxbench kills the adapter when a trial ends abnormally: take the server down with it.
    signal.signal(signal.SIGTERM, lambda *_: (stop_server(), os._exit(143)))
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                m = json.loads(line)
            except ValueError as e:
                send({"type": "error", "message": f"not JSON: {e}"})
                continue
            t, i = m.get("type"), m.get("id")
            if t == "start":
                if m.get("protocol") != PROTOCOL:
                    send({"type": "error", "id": i, "fatal": True,
                          "message": f"this adapter speaks {PROTOCOL}, not {m.get('protocol')}"})
                    return 2
                configure(m)
                send({"type": "ready", "id": i, "protocol": PROTOCOL, "agent": "opencode"})
            elif t == "user_turn":
                send({"type": "turn_complete", "id": i, "outcome": user_turn(m)})
            elif t == "restart":
                stop_server()
                state["session"] = None  # reloaded from session_dir by the next turn
                send({"type": "ack", "id": i})
            elif t == "instructions_edited":
                send({"type": "ack", "id": i})
            elif t == "compact":
                send({"type": "compact_complete", "id": i, "outcome": compact(m)})
            elif t == "shutdown":
                stop_server()
                send({"type": "bye", "id": i})
                return 0
            else:
                send({"type": "error", "id": i, "message": f"unknown message type {t!r}"})
    except Exception as e:  # an adapter bug must not look like an agent answer
        send({"type": "error", "fatal": True, "message": f"adapter: {e!r}"})
        return 1
    finally:
        stop_server()
    return 0


if __name__ == "__main__":
    sys.exit(main())
