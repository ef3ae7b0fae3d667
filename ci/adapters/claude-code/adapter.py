#!/usr/bin/env python3
"""ctxbench.agent/1 adapter for Claude Code (npm `@anthropic-ai/claude-code`), stdlib only.

Claude Code manages its own context: when a conversation nears its auto-compact threshold
(a share of the context window) it summarizes the history with the model and continues
from the summary, and `/compact` does the same on demand. This adapter drives the real CLI
headless, as its SDK does, in the Anthropic Messages wire:

  start               one long-lived `claude -p --input-format stream-json --output-format
                      stream-json` process per run, with ANTHROPIC_BASE_URL =
                      model.anthropic_base_url (a placeholder key; the endpoint takes
                      none), a private HOME under session_dir, the instruction file as the
                      system prompt (`--system-prompt`), no built-in tools (`--tools ""`),
                      the scenario's tools from a stdio MCP server (ci/adapters/common/
                      scripted_tools.py) that replays ctxbench's scripted results — Claude
                      Code names them `mcp__ctxbench__<tool>`; the window
                      (CLAUDE_CODE_MAX_CONTEXT_TOKENS, CLAUDE_CODE_AUTO_COMPACT_WINDOW) and
                      the auto-compact threshold (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE) from the
                      scenario
  user_turn           one `user` line on the CLI's stdin; the `result` line ends the turn
  restart             quit the CLI; the next turn starts it with `--continue`
  instructions_edited the instruction file is the system prompt, read at process start:
                      restart quietly (`--continue`) so the next turn sees the edit
  compact             `/compact` (dry_run: `unchanged`, no model call)
  shutdown            bye (no transcript exported)

Modes: `compact` keeps auto-compact on at the scenario's budget; `off` and `warn` turn it
off (DISABLE_AUTO_COMPACT=1) — Claude Code has no warn-only mode.
The CLI is $CTXBENCH_CLAUDE_BIN (printed by ci/adapters/claude-code/install), else `claude`.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import queue

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import scripted_tools  # noqa: E402
import lifeline  # noqa: E402

PROTOCOL = "ctxbench.agent/1"
CLAUDE = os.environ.get("CTXBENCH_CLAUDE_BIN") or shutil.which("claude") or "claude"
TURN_TIMEOUT = float(os.environ.get("CTXBENCH_CLAUDE_TURN_TIMEOUT", "300"))

state = {"proc": None, "started": False}




def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(*a):
    print("[claude-adapter]", *a, file=sys.stderr, flush=True)


def configure(m):
    sd = m["session_dir"]
    home = os.path.join(sd, "claude-home")
    tools_dir = os.path.join(sd, "claude-tools")
    os.makedirs(home, exist_ok=True)
    os.makedirs(tools_dir, exist_ok=True)
    tools = m.get("tools") or []
    tools_json = os.path.join(tools_dir, "tools.json")
    with open(tools_json, "w") as f:
        json.dump(tools, f)
    helper = os.path.join(HERE, "..", "common", "scripted_tools.py")
    mcp = os.path.join(tools_dir, "mcp.json")
    with open(mcp, "w") as f:
        json.dump({"mcpServers": {"ctxbench": {
            "type": "stdio", "command": sys.executable or "python3",
            "args": [helper, tools_dir, "mcp", tools_json]}}}, f)
    model, ctx = m["model"], m.get("context") or {}
    window = int(model["context_window"])
    reserve = max(int(ctx.get("reserved_output_tokens") or model.get("max_output_tokens") or 0),
                  int(ctx.get("buffer_tokens") or 0))
    pct = max(1, min(100, int(100 * (window - reserve) / window)))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "OPENAI_"))}
    e.update(HOME=home, ANTHROPIC_BASE_URL=model.get("anthropic_base_url") or model["base_url"].rsplit("/v1", 1)[0],
             ANTHROPIC_API_KEY="sk-ant-ctxbench-no-key", ANTHROPIC_MODEL=model["name"],
             ANTHROPIC_SMALL_FAST_MODEL=model["name"],
             CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
             DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1", DISABLE_BUG_COMMAND="1",
             CLAUDE_CODE_DISABLE_AUTO_MEMORY="1", CLAUDE_CODE_DISABLE_CLAUDE_MDS="1",
             CLAUDE_CODE_DISABLE_BUNDLED_SKILLS="1", CLAUDE_CODE_DISABLE_BACKGROUND_TASKS="1",
             CLAUDE_CODE_MAX_OUTPUT_TOKENS=str(int(model.get("max_output_tokens") or 1024)),
             CLAUDE_CODE_MAX_CONTEXT_TOKENS=str(window), CLAUDE_CODE_AUTO_COMPACT_WINDOW=str(window),
             MAX_MCP_OUTPUT_TOKENS="100000", NO_COLOR="1")
    if m["mode"] == "compact":
        e["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] = str(pct)
    else:
        e["DISABLE_AUTO_COMPACT"] = "1"
    state.update(home=home, tools_dir=tools_dir, workspace=m["workspace"], model=model,
                 instructions=m["instructions_path"], mcp=mcp, has_tools=bool(tools),
                 names=[t["name"] for t in tools], env=e)


def env():
    return state["env"]


def spawn():
    try:
        with open(state["instructions"]) as f:
            system = f.read()
    except OSError:
        system = ""
    cmd = [CLAUDE, "-p", "--input-format", "stream-json", "--output-format", "stream-json",
           "--verbose", "--model", state["model"]["name"],
           "--system-prompt", system or " ", "--tools", "", "--strict-mcp-config"]
    if state["has_tools"]:
        cmd += ["--mcp-config", state["mcp"],
                "--allowedTools", ",".join("mcp__ctxbench__" + n for n in state["names"])]
    if state["started"]:
        cmd.append("--continue")
    log("spawn", " ".join(cmd[:3]), "…", "--continue" if state["started"] else "")
    p = subprocess.Popen(cmd, cwd=state["workspace"], env=env(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    q = queue.Queue()

    def pump():
        for line in p.stdout:
            q.put(line)
        q.put(None)

    def drain_err():
        for line in p.stderr:
            state.setdefault("stderr", []).append(line)
            del state["stderr"][:-40]

    threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=drain_err, daemon=True).start()
    state.update(proc=p, out=q, started=True)


def stop():
    p = state.get("proc")
    if p is None:
        return
    try:
        p.stdin.close()
    except OSError:
        pass
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    state["proc"] = None


def stderr_tail():
    return "".join(state.get("stderr", []))[-1500:]


def exchange(text):
    """Send one user message; collect the stream until its `result` line."""
    if state["proc"] is None or state["proc"].poll() is not None:
        spawn()
    p = state["proc"]
    msg = {"type": "user", "session_id": "", "message": {"role": "user", "content": text},
           "parent_tool_use_id": None}
    try:
        p.stdin.write(json.dumps(msg) + "\n")
        p.stdin.flush()
    except OSError as e:
        state["proc"] = None
        return None, [], f"writing to claude: {e}; {stderr_tail()}"
    seen = []
    while True:
        try:
            line = state["out"].get(timeout=TURN_TIMEOUT)
        except queue.Empty:
            p.kill()
            state["proc"] = None
            return None, seen, f"claude sent nothing for {TURN_TIMEOUT:.0f}s"
        if line is None:
            state["proc"] = None
            return None, seen, f"claude exited ({p.wait()}): {stderr_tail()}"
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        seen.append(ev)
        if ev.get("type") == "result":
            return ev, seen, ""


def outcome_of(result, detail):
    if result is None:
        return classify(detail)
    if result.get("terminal_reason") == "blocking_limit":
        # Claude Code's own stop: the context is at its blocking limit and it sends nothing.
        return {"status": "limit_reached", "reason": "context_exhausted",
                "detail": "Claude Code stopped at its blocking context limit (terminal_reason: "
                          "blocking_limit) without sending the request"}
    if not result.get("is_error"):
        return {"status": "completed", "reply": result.get("result") or ""}
    return classify((result.get("error") or {}).get("message") or json.dumps(result))


def classify(detail):
    detail = (detail or "")[-2000:]
    if re.search(r"context.length|maximum context|context_length_exceeded|too long|exceeds the (context|model)", detail, re.I):
        return {"status": "failed", "reason": "provider_overflow", "detail": detail}
    if re.search(r"ECONNREFUSED|Connection error|fetch failed|timed out|sent nothing", detail, re.I):
        return {"status": "errored", "detail": detail}
    return {"status": "failed", "reason": "provider_rejected", "detail": detail}


def user_turn(m):
    scripted_tools.set_turn(state["tools_dir"], m.get("tools_index"))
    result, _, detail = exchange(m["text"])
    return outcome_of(result, detail)


def compact(m):
    if m.get("dry_run"):
        return {"outcome": "unchanged", "reason": "dry_run"}
    if not state["started"]:
        return {"outcome": "unchanged", "reason": "nothing_to_compact"}
    result, seen, detail = exchange("/compact")
    text = json.dumps(seen)
    if result is None or result.get("is_error"):
        return {"outcome": "failed", "reason": "summarizer_failed",
                "detail": detail or (result.get("error") or {}).get("message", "")}
    said = (result.get("result") or "") + text
    m_ = re.search(r"from (\d[\d,]*) to (\d[\d,]*) tokens", said)
    if m_:
        before, after = (int(x.replace(",", "")) for x in m_.groups())
        return {"outcome": "compacted", "checkpoint_id": result.get("uuid") or "claude",
                "reclaimed_tokens": max(0, before - after)}
    if re.search(r"nothing to compress|not enough|empty", said, re.I):
        return {"outcome": "unchanged", "reason": "nothing_to_compact"}
    return {"outcome": "compacted", "checkpoint_id": result.get("uuid") or "claude",
            "reclaimed_tokens": 0}


def main():
    lifeline.watch()  # die with ctxbench, even mid-turn
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            m = json.loads(line)
        except ValueError as e:
            send({"type": "error", "message": f"not JSON: {e}"})
            continue
        t, i = m.get("type"), m.get("id")
        try:
            if t == "start":
                if m.get("protocol") != PROTOCOL:
                    send({"type": "error", "id": i, "fatal": True,
                          "message": f"this adapter speaks {PROTOCOL}, not {m.get('protocol')}"})
                    return 2
                configure(m)
                send({"type": "ready", "id": i, "protocol": PROTOCOL, "agent": "claude-code"})
            elif t == "user_turn":
                send({"type": "turn_complete", "id": i, "outcome": user_turn(m)})
            elif t in ("restart", "instructions_edited"):
                stop()
                send({"type": "ack", "id": i})
            elif t == "compact":
                send({"type": "compact_complete", "id": i, "outcome": compact(m)})
            elif t == "shutdown":
                stop()
                send({"type": "bye", "id": i})
                return 0
            else:
                send({"type": "error", "id": i, "message": f"unknown message type {t!r}"})
        except Exception as e:  # an adapter bug must not look like an agent answer
            send({"type": "error", "id": i, "fatal": True, "message": f"adapter: {e!r}"})
            stop()
            return 1
    stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
