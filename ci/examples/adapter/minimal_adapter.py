#!/usr/bin/env python3
"""A minimal `ctxbench.agent/1` adapter — the starting point for wiring your own runtime.

It is a complete, honest runtime with NO context management: every turn it sends the whole
conversation to the model endpoint ctxbench gives it, executes the tool calls the model makes
from the turn's tools index, persists the conversation in `session_dir` (so `restart` works),
rereads the instruction file at the start of every run, and answers `compact` with
`unchanged`. In `compact` mode it therefore overflows on long sessions and ctxbench's gates
fail it, as they should. Replace `run_turn` with a call into your runtime.

Standard library only (Python 3.8+). Protocol: docs/agent-protocol.md.
"""
import json
import os
import sys
import urllib.error
import urllib.request

PROTOCOL = "ctxbench.agent/1"


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Runtime:
    def __init__(self, start):
        self.base_url = start["model"]["base_url"].rstrip("/")
        self.model = start["model"]["name"]
        self.max_output = start["model"].get("max_output_tokens", 1024)
        self.instructions_path = start["instructions_path"]
        self.session = os.path.join(start["session_dir"], "history.json")
        self.tools = [
            {"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t.get("parameters", {"type": "object"})}}
            for t in start.get("tools", [])
        ]
        self.history = self.load()

    def load(self):
        try:
            with open(self.session, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return []

    def save(self):
        os.makedirs(os.path.dirname(self.session), exist_ok=True)
        tmp = self.session + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.history, f)
        os.replace(tmp, self.session)

    def instructions(self):
        try:
            with open(self.instructions_path, encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""

    def complete(self, messages):
        body = {"model": self.model, "messages": messages, "max_tokens": self.max_output}
        if self.tools:
            body["tools"] = self.tools
        req = urllib.request.Request(self.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.load(r)["choices"][0]["message"]

    def run_turn(self, text, tools_index):
        try:
            with open(tools_index, encoding="utf-8") as f:
                scripted = json.load(f)
        except (OSError, ValueError, TypeError):
            scripted = []
        system = {"role": "system", "content": self.instructions()}  # frozen for this run
        self.history.append({"role": "user", "content": text})
        for _ in range(64):  # this runtime's own bound on tool rounds
            try:
                reply = self.complete([system] + self.history)
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", "replace")[:500]
                reason = "provider_overflow" if "context" in detail.lower() else "provider_rejected"
                self.save()
                return {"status": "failed", "reason": reason, "detail": detail}
            calls = reply.get("tool_calls") or []
            self.history.append({k: v for k, v in reply.items() if k in ("role", "content", "tool_calls")})
            if not calls:
                self.save()
                return {"status": "completed", "reply": reply.get("content") or ""}
            for call in calls:
                name = call["function"]["name"]
                if scripted and scripted[0]["name"] == name:
                    entry = scripted.pop(0)
                    with open(entry["path"], encoding="utf-8") as f:
                        result = f.read()
                else:
                    result = "error: no such tool result"
                self.history.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        self.save()
        return {"status": "failed", "reason": "round_limit", "detail": "more than 64 tool rounds"}


def transcript(history):
    """The conversation in ctxbench's message shape: tool calls as {id, name, arguments}."""
    out = []
    for m in history:
        t = {"role": m["role"], "content": m.get("content") or ""}
        if m.get("tool_calls"):
            t["tool_calls"] = [
                {"id": c["id"], "name": c["function"]["name"],
                 "arguments": json.loads(c["function"].get("arguments") or "{}")}
                for c in m["tool_calls"]
            ]
        if m.get("tool_call_id"):
            t["tool_call_id"] = m["tool_call_id"]
        out.append(t)
    return out


def main():
    runtime = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"type": "error", "message": "could not parse the last line"})
            continue
        kind, mid = msg.get("type"), msg.get("id")
        if kind == "start":
            runtime = Runtime(msg)
            send({"type": "ready", "id": mid, "protocol": PROTOCOL, "agent": "minimal-example"})
        elif kind == "user_turn":
            send({"type": "turn_complete", "id": mid, "outcome": runtime.run_turn(msg["text"], msg.get("tools_index"))})
        elif kind == "restart":
            runtime.history = runtime.load()  # drop in-memory state, reload from disk
            send({"type": "ack", "id": mid})
        elif kind == "instructions_edited":
            send({"type": "ack", "id": mid})  # reread at the next run anyway
        elif kind == "compact":
            send({"type": "compact_complete", "id": mid,
                  "outcome": {"outcome": "unchanged", "reason": "nothing_to_compact"}})
        elif kind == "shutdown":
            send({"type": "bye", "id": mid, "transcript": transcript(runtime.history if runtime else [])})
            return
        else:
            send({"type": "ack", "id": mid})


if __name__ == "__main__":
    main()
