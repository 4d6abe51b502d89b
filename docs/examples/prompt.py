#!/usr/bin/env python3
"""Sends one prompt to `pincer acp` and prints the answer as it streams.

No SDK: JSON-RPC 2.0, one JSON object per line, over the child's stdin and
stdout. Permission requests are answered with --allow (allow once) or,
by default, by rejecting them. Usage: prompt.py [--allow] "your prompt"
"""
import json
import os
import subprocess
import sys

args = sys.argv[1:]
allow = "--allow" in args
text = " ".join(a for a in args if a != "--allow")

agent = subprocess.Popen(
    ["pincer", "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
)
next_id = 0


def send(message):
    agent.stdin.write(json.dumps(message) + "\n")
    agent.stdin.flush()


def request(method, params):
    """Sends a request and returns its id; the answer comes later."""
    global next_id
    next_id += 1
    send({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params})
    return next_id


def wait_for(request_id):
    """Reads messages until the answer to `request_id`, handling the
    notifications and requests that come before it."""
    for line in agent.stdout:
        message = json.loads(line)
        if "method" not in message:  # a response
            if message["id"] == request_id:
                if "error" in message:
                    sys.exit(f"pincer: {message['error']['message']}")
                return message["result"]
        elif message["method"] == "session/update":
            show(message["params"]["update"])
        elif message["method"] == "session/request_permission":
            answer_permission(message)
        elif "id" in message:  # a request this client does not offer
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": "not supported"}})
    sys.exit("pincer exited before it answered")


def show(update):
    kind = update["sessionUpdate"]
    if kind == "agent_message_chunk" and update["content"]["type"] == "text":
        print(update["content"]["text"], end="", flush=True)
    elif kind == "tool_call":
        print(f"[tool] {update['title']}", file=sys.stderr)


def answer_permission(message):
    params = message["params"]
    wanted = "allow_once" if allow else "reject_once"
    option = next(o for o in params["options"] if o["kind"] == wanted)
    print(f"[permission] {params['toolCall']['title']}: {option['name']}",
          file=sys.stderr)
    send({"jsonrpc": "2.0", "id": message["id"],
          "result": {"outcome": {"outcome": "selected",
                                 "optionId": option["optionId"]}}})


wait_for(request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
session = wait_for(request("session/new", {"cwd": os.getcwd(), "mcpServers": []}))
result = wait_for(request("session/prompt", {
    "sessionId": session["sessionId"],
    "prompt": [{"type": "text", "text": text}],
}))
print()
print(f"[stop] {result['stopReason']}", file=sys.stderr)
agent.stdin.close()
agent.wait()
