#!/usr/bin/env python3
"""ctxbench.agent/1 adapter for Simon Willison's `llm` CLI (https://llm.datasette.io).

A thin adapter for a runtime no one on the ctxbench team wrote: each user turn runs the
real `llm` command line — `llm prompt -m ctxbench [-c] -s <instructions> --functions
<tools.py> <text>` — against the loopback model ctxbench serves, with `LLM_USER_PATH`
pointing at the trial's session directory, so `llm` keeps the conversation in its own
SQLite log (`logs.db`) and `-c` continues it exactly as a user at a terminal would.

What maps to what:
  start               write extra-openai-models.yaml (model id `ctxbench`, api_base = the
                      loopback base URL, model_name = model.name, tools on) and a tools
                      module whose functions replay this turn's scripted tool results
  user_turn           one `llm` process (streams by default, as users run it); its stdout
                      is the reply; "context length" errors -> failed/provider_overflow
  restart             nothing to do: every turn is a fresh process that reloads logs.db
  instructions_edited nothing to do: the instruction file is read at every turn (`-s`)
  compact             `llm` has no compaction: unchanged / not_supported
  shutdown            bye

`llm` has no context management at all, so in `warn` and `compact` modes it behaves as in
`off`; ctxbench grades it black-box from the requests it sends.

Usage:  ctxbench run --sut 'exec:python3 ci/adapters/llm-cli/adapter.py' ...
The `llm` executable is taken from $CTXBENCH_LLM_BIN, else from PATH.
"""

import json
import os
import re
import shutil
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import lifeline  # noqa: E402

PROTOCOL = "ctxbench.agent/1"
LLM = os.environ.get("CTXBENCH_LLM_BIN") or shutil.which("llm") or "llm"

state = {}


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(*a):
    print("[llm-adapter]", *a, file=sys.stderr, flush=True)


def py_ident(name):
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None


def tools_module(tools):
    """Python functions named like the scenario's tools. `llm --functions` advertises them
    to the model (schema from the signature) and runs them when the model calls them; each
    returns the next scripted result of this turn (ctxbench's tools_index), once."""
    lines = [
        "import json, os",
        "_queue = None",
        "def _next(name, args):",
        "    global _queue",
        "    if _queue is None:",
        "        p = os.environ.get('CTXBENCH_TOOLS_INDEX')",
        "        _queue = json.load(open(p)) if p and os.path.exists(p) else []",
        "    if _queue and _queue[0]['name'] == name:",
        "        with open(_queue.pop(0)['path']) as f:",
        "            return f.read()",
        "    return 'error: tool ' + name + ' is not available here'",
    ]
    for t in tools:
        name = t.get("name", "")
        if not py_ident(name):
            log(f"skipping tool {name!r}: not a Python identifier")
            continue
        props = (t.get("parameters") or {}).get("properties") or {}
        params = [p for p in props if py_ident(p)]
        sig = ", ".join(f"{p}=None" for p in params)
        doc = json.dumps(t.get("description") or name)
        args = "{" + ", ".join(f"{json.dumps(p)}: {p}" for p in params) + "}"
        lines += [
            f"def {name}({sig}):",
            f"    {doc}",
            f"    return _next({json.dumps(name)}, {args})",
        ]
    return "\n".join(lines) + "\n"


def start(m):
    user_path = os.path.join(m["session_dir"], "llm")
    os.makedirs(user_path, exist_ok=True)
    model = m["model"]
    with open(os.path.join(user_path, "extra-openai-models.yaml"), "w") as f:
        # JSON is YAML: no quoting surprises in URLs or names.
        json.dump([{
            "model_id": "ctxbench",
            "model_name": model["name"],
            "api_base": model["base_url"],
            "supports_tools": True,
        }], f)
    tools_py = os.path.join(user_path, "ctxbench_tools.py")
    with open(tools_py, "w") as f:
        f.write(tools_module(m.get("tools") or []))
    state.update(
        user_path=user_path,
        tools_py=tools_py,
        has_tools=bool(m.get("tools")),
        instructions=m["instructions_path"],
        workspace=m["workspace"],
        max_output=model.get("max_output_tokens"),
        turns=0,
    )


def user_turn(m):
    try:
        with open(state["instructions"]) as f:
            system = f.read()
    except OSError:
        system = ""
    cmd = [LLM, "prompt", "-m", "ctxbench"]
    if state["turns"] > 0:
        cmd.append("-c")
    if system.strip():
        cmd += ["-s", system]
    if state["has_tools"]:
        cmd += ["--functions", state["tools_py"], "--chain-limit", "8"]
    cmd.append(m["text"])
    env = dict(os.environ, LLM_USER_PATH=state["user_path"],
               CTXBENCH_TOOLS_INDEX=m.get("tools_index") or "", NO_COLOR="1")
    env.pop("OPENAI_API_KEY", None)
    state["turns"] += 1
    try:
        # stdin must not be inherited: `llm` reads piped stdin into the prompt, and ours is
        # the protocol channel.
        r = subprocess.run(cmd, cwd=state["workspace"], env=env, capture_output=True,
                           stdin=subprocess.DEVNULL, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"status": "errored", "detail": f"running llm: {e}"}
    if r.returncode == 0:
        return {"status": "completed", "reply": r.stdout.strip()}
    err = (r.stderr or r.stdout).strip()[-2000:]
    log(f"llm exited {r.returncode}: {err}")
    if re.search(r"context.length|maximum context|too long|context_length_exceeded", err, re.I):
        return {"status": "failed", "reason": "provider_overflow", "detail": err}
    if re.search(r"Connection|APIConnectionError|timed out", err):
        return {"status": "errored", "detail": err}
    return {"status": "failed", "reason": "provider_error", "detail": err}


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
        if t == "start":
            if m.get("protocol") != PROTOCOL:
                send({"type": "error", "id": i, "fatal": True,
                      "message": f"this adapter speaks {PROTOCOL}, not {m.get('protocol')}"})
                return 2
            start(m)
            send({"type": "ready", "id": i, "protocol": PROTOCOL, "agent": "llm-cli"})
        elif t == "user_turn":
            send({"type": "turn_complete", "id": i, "outcome": user_turn(m)})
        elif t in ("restart", "instructions_edited"):
            send({"type": "ack", "id": i})
        elif t == "compact":
            send({"type": "compact_complete", "id": i,
                  "outcome": {"outcome": "unchanged", "reason": "not_supported"}})
        elif t == "shutdown":
            send({"type": "bye", "id": i})
            return 0
        else:
            send({"type": "error", "id": i, "message": f"unknown message type {t!r}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
