#!/usr/bin/env python3
"""Scripted tool results for agents that execute tools themselves (stdlib only).

ctxbench materialises each user turn's tool results as `.ctxbench/tools/step-<n>/index.json`
(`[{"name", "arguments", "path"}]`, in call order). An adapter writes the current turn's
index path into STATE_DIR/current (one line) before the turn; every tool call then returns
the next entry's file content when its name matches, at most once per entry (an error
result otherwise, as a real tool would). The cursor lives in STATE_DIR so that agents which
run each tool call as a separate process share it.

Command line (STATE_DIR is the first argument):
  scripted_tools.py STATE_DIR call NAME        arguments as JSON on stdin, result on stdout
  scripted_tools.py STATE_DIR discover TOOLS   TOOLS: JSON file of the protocol's `tools`;
                                               prints Gemini-style function declarations
  scripted_tools.py STATE_DIR mcp TOOLS        a stdio MCP server (JSON-RPC lines) offering
                                               TOOLS; each call plays the next result
"""

import fcntl
import json
import os
import sys


def set_turn(state_dir, index_path):
    """Point the tools at this turn's index (called by the adapter before each turn)."""
    os.makedirs(state_dir, exist_ok=True)
    tmp = os.path.join(state_dir, "current.tmp")
    with open(tmp, "w") as f:
        f.write((index_path or "") + "\n")
    os.replace(tmp, os.path.join(state_dir, "current"))


def call(state_dir, name):
    """The next scripted result for a call of `name`: (ok, text)."""
    with open(os.path.join(state_dir, "lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(os.path.join(state_dir, "current")) as f:
                index_path = f.read().strip()
        except OSError:
            index_path = ""
        entries = []
        if index_path and os.path.exists(index_path):
            with open(index_path) as f:
                entries = json.load(f)
        cursor_file = os.path.join(state_dir, "cursor.json")
        try:
            with open(cursor_file) as f:
                cursor = json.load(f)
        except (OSError, ValueError):
            cursor = {}
        used = cursor.get(index_path, 0)
        if used < len(entries) and entries[used].get("name") == name:
            with open(entries[used]["path"]) as f:
                text = f.read()
            cursor[index_path] = used + 1
            with open(cursor_file + ".tmp", "w") as f:
                json.dump(cursor, f)
            os.replace(cursor_file + ".tmp", cursor_file)
            return True, text
        return False, f"error: tool `{name}` is not available here"


def mcp(state_dir, tools):
    """A minimal MCP server over stdio (newline-delimited JSON-RPC 2.0): initialize,
    tools/list, tools/call, ping; notifications are ignored."""
    def reply(i, result=None, error=None):
        msg = {"jsonrpc": "2.0", "id": i}
        msg.update({"error": error} if error else {"result": result})
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if "id" not in req:
            continue
        method, i = req.get("method"), req["id"]
        if method == "initialize":
            reply(i, {"protocolVersion": (req.get("params") or {}).get("protocolVersion", "2024-11-05"),
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "ctxbench-scripted-tools", "version": "1"}})
        elif method == "tools/list":
            reply(i, {"tools": [{"name": t["name"], "description": t.get("description") or t["name"],
                                 "inputSchema": t.get("parameters") or {"type": "object"}}
                                for t in tools]})
        elif method == "tools/call":
            name = (req.get("params") or {}).get("name", "")
            ok, text = call(state_dir, name)
            reply(i, {"content": [{"type": "text", "text": text}], "isError": not ok})
        elif method == "ping":
            reply(i, {})
        else:
            reply(i, error={"code": -32601, "message": f"method not found: {method}"})
    return 0


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    state_dir, cmd = argv[1], argv[2]
    if cmd == "call" and len(argv) == 4:
        sys.stdin.read()  # the arguments; the script decides the result
        ok, text = call(state_dir, argv[3])
        sys.stdout.write(text)
        return 0 if ok else 1
    if cmd == "discover" and len(argv) == 4:
        with open(argv[3]) as f:
            tools = json.load(f)
        decls = [{"name": t["name"], "description": t.get("description") or t["name"],
                  "parametersJsonSchema": t.get("parameters") or {"type": "object"}}
                 for t in tools]
        json.dump(decls, sys.stdout)
        return 0
    if cmd == "mcp" and len(argv) == 4:
        with open(argv[3]) as f:
            return mcp(state_dir, json.load(f))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
