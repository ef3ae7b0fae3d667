#!/usr/bin/env python3
"""ctxbench.agent/1 adapter for Qwen Code (npm `@qwen-code/qwen-code`), stdlib only.

Qwen Code (a fork of Google's gemini-cli) manages its own context: when the prompt passes
a share of the model's window it compresses the older history into a `<state_snapshot>`
written by the model (`model.chatCompression.contextPercentageThreshold`), and `/compress`
does the same on demand. This adapter drives the real CLI as a headless user would:

  start               one long-lived `qwen --input-format stream-json --output-format
                      stream-json` process per run, its settings in a private QWEN_HOME
                      under session_dir: OpenAI auth at model.base_url (no key), the
                      window (`contextWindowSize`), max output, compression threshold,
                      the instruction file as the system prompt, no built-in tools, the
                      scenario's tools as discovered tools (`tools.discoveryCommand` /
                      `tools.callCommand`) that replay ctxbench's scripted results
  user_turn           one `user` line on the CLI's stdin; the `result` line ends the turn
  restart             quit the CLI; the next turn starts it with `--continue` (its own
                      session file under QWEN_HOME)
  instructions_edited the instruction file is the system prompt, read at process start:
                      restart quietly (`--continue`) so the next turn sees the edit
  compact             `/compress` (dry_run: `unchanged`, no model call)
  shutdown            bye (no transcript: Qwen Code's history is not exported)

Modes: `compact` keeps automatic compression on at the scenario's budget; `off` and `warn`
turn it off (threshold 1.0, i.e. never) — Qwen Code has no warn-only mode.
The CLI is $CTXBENCH_QWEN_BIN (printed by ci/adapters/qwen-code/install), else `qwen`.
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
QWEN = os.environ.get("CTXBENCH_QWEN_BIN") or shutil.which("qwen") or "qwen"
TURN_TIMEOUT = float(os.environ.get("CTXBENCH_QWEN_TURN_TIMEOUT", "300"))

state = {"proc": None, "started": False}

# Qwen Code tools that `tools.eager: []` does not demote (plan-mode lifecycle, task control,
# the agent/goal/question tools, the bridge) — disabled by name so that the model sees only
# the scenario's tools.
BUILTIN_EXEMPT = ["agent", "ask_user_question", "enter_plan_mode", "exit_plan_mode", "get_goal",
                  "list_agents", "skill", "tool_call", "tool_search", "update_goal", "task_stop",
                  "enter_worktree", "exit_worktree", "record_artifact", "report_findings",
                  "send_message", "structured_output", "todo_write", "save_memory", "cron"]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(*a):
    print("[qwen-adapter]", *a, file=sys.stderr, flush=True)


def configure(m):
    sd = m["session_dir"]
    home = os.path.join(sd, "qwen-home")
    tools_dir = os.path.join(sd, "qwen-tools")
    os.makedirs(home, exist_ok=True)
    os.makedirs(tools_dir, exist_ok=True)
    tools = m.get("tools") or []
    with open(os.path.join(tools_dir, "tools.json"), "w") as f:
        json.dump(tools, f)
    helper = os.path.join(HERE, "..", "common", "scripted_tools.py")
    py = sys.executable or "python3"
    # `tools.callCommand` is spawned without a shell, with the tool name as its only argument.
    call = os.path.join(tools_dir, "call")
    with open(call, "w") as f:
        f.write(f'#!/bin/sh\nexec "{py}" "{helper}" "{tools_dir}" call "$1"\n')
    os.chmod(call, 0o755)
    model, ctx = m["model"], m.get("context") or {}
    window = int(model["context_window"])
    reserve = max(int(ctx.get("reserved_output_tokens") or model.get("max_output_tokens") or 0),
                  int(ctx.get("buffer_tokens") or 0))
    if m["mode"] == "compact":
        # Qwen Code compresses once its prompt passes threshold × window; the scenario's
        # available input is window − max(reserve, buffer).
        threshold = max(0.05, min(1.0, (window - reserve) / window))
    else:
        threshold = 1.0
    names = [t["name"] for t in tools]
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {
            "name": model["name"],
            "chatCompression": {"contextPercentageThreshold": threshold},
            "skipStartupContext": True,
            "skipNextSpeakerCheck": True,
            "skipLoopDetection": True,
            "generationConfig": {"contextWindowSize": window,
                                 "samplingParams": {"max_tokens": int(model.get("max_output_tokens") or 1024)}},
        },
        "tools": {
            # No built-in tools: only the scenario's, discovered from our helper and declared
            # upfront (`visible`); every eager built-in is demoted (`eager: []`) and, with the
            # tool_search bridge off, not offered; the exempt ones are disabled by name.
            "eager": [],
            "visible": names,
            "toolSearch": {"enabled": False},
            "disabled": [n for n in BUILTIN_EXEMPT if n not in names],
            "discoveryCommand": f'"{py}" "{helper}" "{tools_dir}" discover "{os.path.join(tools_dir, "tools.json")}"' if tools else None,
            "callCommand": call if tools else None,
            "approvalMode": "yolo",
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "checkpointing": {"enabled": False}},
        # The instruction file is the system prompt (above); no other context files, and none
        # of the background model calls that are not context management (managed auto-memory
        # extraction, "dream" consolidation, skill extraction) nor the skills catalogue.
        "context": {"fileName": ["CTXBENCH_NO_CONTEXT_FILE.md"], "loadMemoryFromIncludeDirectories": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False,
                   "enableAutoSkill": False},
        "skills": {"disabledLevels": ["project", "user", "extension", "bundled"]},
        "ui": {"hideBanner": True, "hideTips": True},
    }
    settings["tools"] = {k: v for k, v in settings["tools"].items() if v is not None}
    with open(os.path.join(home, "settings.json"), "w") as f:
        json.dump(settings, f, indent=1)
    state.update(home=home, tools_dir=tools_dir, workspace=m["workspace"], model=model,
                 instructions=m["instructions_path"], names=names, mode=m["mode"])


def env():
    e = dict(os.environ)
    for k in list(e):
        if k.startswith(("OPENAI_", "QWEN_", "GEMINI_", "DASHSCOPE_", "ANTHROPIC_")):
            e.pop(k)
    e.update(QWEN_HOME=state["home"], HOME=state["home"], OPENAI_BASE_URL=state["model"]["base_url"],
             OPENAI_API_KEY="ctxbench-no-key", OPENAI_MODEL=state["model"]["name"],
             NO_COLOR="1", CI="1", QWEN_CODE_NO_RELAUNCH="1", NO_BROWSER="1",
             # Qwen Code 0.24 runs `tools.discoveryCommand` only on its legacy blocking
             # discovery path; the default background path discovers MCP servers only.
             QWEN_CODE_LEGACY_MCP_BLOCKING="1")
    return e


def spawn():
    try:
        with open(state["instructions"]) as f:
            system = f.read()
    except OSError:
        system = ""
    cmd = [QWEN, "--input-format", "stream-json", "--output-format", "stream-json",
           "--approval-mode", "yolo", "--auth-type", "openai", "-m", state["model"]["name"],
           "--openai-base-url", state["model"]["base_url"], "--openai-api-key", "ctxbench-no-key",
           "--system-prompt", system or " "]
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
        return None, [], f"writing to qwen: {e}; {stderr_tail()}"
    seen = []
    while True:
        try:
            line = state["out"].get(timeout=TURN_TIMEOUT)
        except queue.Empty:
            p.kill()
            state["proc"] = None
            return None, seen, f"qwen sent nothing for {TURN_TIMEOUT:.0f}s"
        if line is None:
            state["proc"] = None
            return None, seen, f"qwen exited ({p.wait()}): {stderr_tail()}"
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
    result, seen, detail = exchange("/compress")
    text = json.dumps(seen)
    if result is None or result.get("is_error"):
        return {"outcome": "failed", "reason": "summarizer_failed",
                "detail": detail or (result.get("error") or {}).get("message", "")}
    said = (result.get("result") or "") + text
    m_ = re.search(r"from (\d[\d,]*) to (\d[\d,]*) tokens", said)
    if m_:
        before, after = (int(x.replace(",", "")) for x in m_.groups())
        return {"outcome": "compacted", "checkpoint_id": result.get("uuid") or "qwen",
                "reclaimed_tokens": max(0, before - after)}
    if re.search(r"nothing to compress|not enough|empty", said, re.I):
        return {"outcome": "unchanged", "reason": "nothing_to_compact"}
    return {"outcome": "compacted", "checkpoint_id": result.get("uuid") or "qwen",
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
                send({"type": "ready", "id": i, "protocol": PROTOCOL, "agent": "qwen-code"})
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
