#!/usr/bin/env python3
"""ctxbench.agent/1 adapter for gptme (PyPI `gptme`), stdlib only.

gptme manages its own context: before a model call whose conversation passes its context
budget (`--context-budget`, a window fraction or absolute tokens) its autocompact hook
compacts the log — old tool outputs are pruned or compressed and, past that, the history is
summarized — and `/compact` does it on demand. This adapter drives the real CLI as a
scripting user would:

  start               a tool module (one gptme ToolSpec per scenario tool, exact names,
                      `--tool-format tool` so they travel as native function calls) that
                      replays ctxbench's scripted results; gptme's own tools are not loaded
  user_turn           one `gptme --non-interactive --name <conv> [-r]` process with the
                      model `local/<name>` at model.base_url (OPENAI_BASE_URL, no key), the
                      instruction file as the system prompt (`--system`), its logs under
                      session_dir (the conversation persists across turns and restarts)
  restart             nothing to keep: every turn is a fresh process resuming the log
  instructions_edited nothing to do: the instruction file is read at every turn
  compact             gptme `/compact` in a non-interactive resume (dry_run: `unchanged`)
  shutdown            bye (no transcript exported)

Modes: `compact` sets `--context-budget` to the scenario's available input
(window − max(output reserve, buffer)); `off` and `warn` set it past the window (no
automatic compaction) — gptme has no warn-only mode.
The CLI is $CTXBENCH_GPTME_BIN (printed by ci/adapters/gptme/install), else `gptme`.
"""

import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import scripted_tools  # noqa: E402
import lifeline  # noqa: E402

PROTOCOL = "ctxbench.agent/1"
GPTME = os.environ.get("CTXBENCH_GPTME_BIN") or shutil.which("gptme") or "gptme"
TURN_TIMEOUT = float(os.environ.get("CTXBENCH_GPTME_TURN_TIMEOUT", "300"))
CONV = "ctxbench"

state = {"turns": 0}


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(*a):
    print("[gptme-adapter]", *a, file=sys.stderr, flush=True)


def tools_module(tools, helper, tools_dir):
    lines = [
        "import json, subprocess, sys",
        "from gptme.message import Message",
        "from gptme.tools.base import Parameter, ToolSpec",
        f"_HELPER = {json.dumps(helper)}",
        f"_STATE = {json.dumps(tools_dir)}",
        "def _call(name, kwargs):",
        "    r = subprocess.run([sys.executable, _HELPER, _STATE, 'call', name],",
        "                       input=json.dumps(kwargs or {}), capture_output=True, text=True)",
        "    return Message('system', r.stdout or r.stderr)",
    ]
    for k, t in enumerate(tools):
        name = t["name"]
        params = (t.get("parameters") or {})
        req = set(params.get("required") or [])
        plist = ", ".join(
            f"Parameter(name={json.dumps(p)}, type={json.dumps((s or {}).get('type') or 'string')}, "
            f"description={json.dumps((s or {}).get('description') or p)}, required={p in req})"
            for p, s in (params.get("properties") or {}).items())
        lines += [
            f"def _exec_{k}(code, args, kwargs):",
            f"    return _call({json.dumps(name)}, kwargs)",
            f"tool_{k} = ToolSpec(name={json.dumps(name)}, desc={json.dumps(t.get('description') or name)},",
            f"    parameters=[{plist}], execute=_exec_{k})",
        ]
    return "\n".join(lines) + "\n"


def configure(m):
    sd = m["session_dir"]
    logs = os.path.join(sd, "gptme-logs")
    home = os.path.join(sd, "gptme-home")
    tools_dir = os.path.join(sd, "gptme-tools")
    for d in (logs, home, tools_dir):
        os.makedirs(d, exist_ok=True)
    helper = os.path.join(HERE, "..", "common", "scripted_tools.py")
    tools = m.get("tools") or []
    mod = os.path.join(tools_dir, "ctxbench_tools.py")
    with open(mod, "w") as f:
        f.write(tools_module(tools, helper, tools_dir))
    model, ctx = m["model"], m.get("context") or {}
    window = int(model["context_window"])
    reserve = max(int(ctx.get("reserved_output_tokens") or model.get("max_output_tokens") or 0),
                  int(ctx.get("buffer_tokens") or 0))
    budget = window - reserve if m["mode"] == "compact" else window * 100
    state.update(logs=logs, home=home, tools_dir=tools_dir, module=mod, has_tools=bool(tools),
                 workspace=m["workspace"], model=model, instructions=m["instructions_path"],
                 budget=budget, started=os.path.exists(os.path.join(logs, CONV)))


def run_gptme(prompt):
    try:
        with open(state["instructions"]) as f:
            system = f.read().strip()
    except OSError:
        system = ""
    cmd = [GPTME, "--non-interactive", "--name", CONV, "-m", f"local/{state['model']['name']}",
           "--tool-format", "tool", "--no-stream", "--context-budget", str(state["budget"]),
           "--no-workspace", "--system", system or "You are a helpful assistant.",
           "--tools", state["module"] if state["has_tools"] else "none"]
    if state["started"]:
        cmd.append("-r")
    cmd.append(prompt)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "GPTME_"))}
    e.update(HOME=state["home"], XDG_CONFIG_HOME=os.path.join(state["home"], ".config"),
             XDG_DATA_HOME=os.path.join(state["home"], ".local", "share"),
             GPTME_LOGS_HOME=state["logs"], OPENAI_BASE_URL=state["model"]["base_url"],
             OPENAI_API_KEY="ctxbench-no-key", NO_COLOR="1", GPTME_CHECK_UPDATES="false",
             GPTME_TELEMETRY_ENABLED="false", PYTHONUNBUFFERED="1")
    try:
        r = subprocess.run(cmd, cwd=state["workspace"], env=e, capture_output=True,
                           stdin=subprocess.DEVNULL, text=True, timeout=TURN_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as ex:
        return None, f"running gptme: {ex}"
    state["started"] = True
    return r, ""


def last_reply():
    """The last assistant message of the conversation log (gptme's own JSONL)."""
    path = os.path.join(state["logs"], CONV, "conversation.jsonl")
    reply = ""
    try:
        with open(path) as f:
            for line in f:
                try:
                    m = json.loads(line)
                except ValueError:
                    continue
                if m.get("role") == "assistant":
                    reply = m.get("content") or ""
                elif m.get("role") == "user":
                    reply = ""
    except OSError:
        pass
    return reply.strip()


def classify(detail):
    detail = (detail or "")[-2000:]
    if re.search(r"context.length|maximum context|context_length_exceeded|too long", detail, re.I):
        return {"status": "failed", "reason": "provider_overflow", "detail": detail}
    if re.search(r"APIConnectionError|Connection error|timed out", detail, re.I):
        return {"status": "errored", "detail": detail}
    return {"status": "failed", "reason": "provider_rejected", "detail": detail}


def user_turn(m):
    scripted_tools.set_turn(state["tools_dir"], m.get("tools_index"))
    r, err = run_gptme(m["text"])
    if r is None:
        return {"status": "errored", "detail": err}
    if r.returncode != 0:
        log(f"gptme exited {r.returncode}: {r.stderr[-1500:]}")
        return classify(r.stderr + r.stdout)
    return {"status": "completed", "reply": last_reply()}


def compact(m):
    if m.get("dry_run"):
        return {"outcome": "unchanged", "reason": "dry_run"}
    if not state["started"]:
        return {"outcome": "unchanged", "reason": "nothing_to_compact"}
    r, err = run_gptme("/compact")
    if r is None or r.returncode != 0:
        return {"outcome": "failed", "reason": "summarizer_failed",
                "detail": err or (r.stderr + r.stdout)[-1500:]}
    out = r.stdout + r.stderr
    if re.search(r"nothing to compact|no compaction needed|not needed", out, re.I):
        return {"outcome": "unchanged", "reason": "nothing_to_compact"}
    return {"outcome": "compacted", "checkpoint_id": "gptme", "reclaimed_tokens": 0}


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
                send({"type": "ready", "id": i, "protocol": PROTOCOL, "agent": "gptme"})
            elif t == "user_turn":
                send({"type": "turn_complete", "id": i, "outcome": user_turn(m)})
            elif t in ("restart", "instructions_edited"):
                send({"type": "ack", "id": i})
            elif t == "compact":
                send({"type": "compact_complete", "id": i, "outcome": compact(m)})
            elif t == "shutdown":
                send({"type": "bye", "id": i})
                return 0
            else:
                send({"type": "error", "id": i, "message": f"unknown message type {t!r}"})
        except Exception as e:  # an adapter bug must not look like an agent answer
            send({"type": "error", "id": i, "fatal": True, "message": f"adapter: {e!r}"})
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
