"""Drives an ACP agent with the official Python SDK (`agent-client-protocol`).

An independent client: it shares no code with pincer or its Rust test
harness, so a test that passes through it shows that pincer speaks the
protocol the way another implementation reads it, not just the way our own
serde types do.

Usage: acp_python_client.py --cwd PROJECT_DIR -- AGENT_COMMAND [ARGS...]
       acp_python_client.py --cwd PROJECT_DIR --ws ws://HOST:PORT/acp

The second form reaches a remote agent over ACP's websocket transport (the
SDK's own `acp.ws` client), sending `Authorization: Bearer
$PINCER_GATEWAY_TOKEN` with the upgrade.

The agent inherits this process's environment unchanged. The client
advertises no fs or terminal capabilities, answers every permission request
with its `allow_once` option, and sends one prompt about hello.txt. At the
end it prints ONE JSON object on stdout:

    {"protocolVersion", "agentName", "stopReason",
     "updates":     sessionUpdate kinds in order, each run of consecutive
                    agent_message_chunk / agent_thought_chunk collapsed to one
                    (how a stream is split into chunks is not part of the
                    contract),
     "toolCalls":   [{"id", "title", "kind", "status"}] per tool call: its
                    `tool_call` with every later `tool_call_update` applied,
     "permissionRequests": tool call ids the agent asked permission for,
     "text":        the agent_message_chunk texts concatenated,
     "sdkComplaints": everything the SDK logged or warned about (a message it
                    could not parse or validate is logged and dropped, so a
                    protocol deviation shows up here rather than as an error),
     "lossyFields": fields of the agent's messages that the SDK's models
                    dropped or replaced when parsing them (the SDK ignores
                    unknown fields and silently resets some malformed ones to
                    their defaults, so these would otherwise go unnoticed)}

Any exception, from the SDK or from a check here, exits non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import warnings
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)
from pydantic import BaseModel, ValidationError

PROMPT = "What does hello.txt say?"
COALESCED_KINDS = {"agent_message_chunk", "agent_thought_chunk"}


class Complaints(logging.Handler):
    """Keeps every warning or error the SDK logs (and, through
    `logging.captureWarnings`, every Python warning)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message = f"{message}: {record.exc_info[1]!r}"
        self.messages.append(message)


class WireCheck:
    """Re-parses each message the agent sends with the SDK's models and
    records every field that does not survive the round trip."""

    REQUESTS: dict[str, type[BaseModel]] = {
        "session/update": SessionNotification,
        "session/request_permission": RequestPermissionRequest,
    }
    RESULTS: dict[str, type[BaseModel]] = {
        "initialize": InitializeResponse,
        "session/new": NewSessionResponse,
        "session/prompt": PromptResponse,
    }

    def __init__(self) -> None:
        self.sent_methods: dict[Any, str] = {}
        self.problems: list[str] = []

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        method = message.get("method")
        if event.direction == StreamDirection.OUTGOING:
            if method is not None and "id" in message:
                self.sent_methods[message["id"]] = method
            return
        if method in self.REQUESTS:
            self.check(method, self.REQUESTS[method], message.get("params"))
        elif "result" in message:
            sent = self.sent_methods.get(message.get("id"))
            if sent in self.RESULTS:
                self.check(f"{sent} result", self.RESULTS[sent], message["result"])

    def check(self, what: str, model: type[BaseModel], raw: Any) -> None:
        try:
            parsed = model.model_validate(raw)
        except ValidationError as e:
            self.problems.append(f"{what}: does not validate: {e}")
            return
        dumped = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
        self.diff(what, raw, dumped)

    def diff(self, path: str, raw: Any, parsed: Any) -> None:
        if isinstance(raw, dict) and isinstance(parsed, dict):
            for key, value in raw.items():
                if key not in parsed:
                    self.problems.append(f"{path}.{key}: dropped ({json.dumps(value)[:200]})")
                else:
                    self.diff(f"{path}.{key}", value, parsed[key])
        elif isinstance(raw, list) and isinstance(parsed, list) and len(raw) == len(parsed):
            for i, (a, b) in enumerate(zip(raw, parsed)):
                self.diff(f"{path}[{i}]", a, b)
        elif raw != parsed:
            self.problems.append(f"{path}: {json.dumps(raw)[:200]} parsed as {json.dumps(parsed)[:200]}")


class Client:
    """The editor side: records what the agent sends."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call.tool_call_id)
        allow = [option for option in options if option.kind == "allow_once"]
        if not allow:
            raise RuntimeError(f"permission request without an allow_once option: {options!r}")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow[0].option_id)
        )

    # The client advertises no fs capability, so the agent must not call these.
    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/write_text_file")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def summarize(client: Client, session_id: str) -> dict[str, Any]:
    kinds: list[str] = []
    text: list[str] = []
    tool_calls: dict[str, dict[str, Any]] = {}
    for update_session, update in client.updates:
        if update_session != session_id:
            raise RuntimeError(f"update for session {update_session!r}, expected {session_id!r}")
        kind = update.session_update
        if not (kind in COALESCED_KINDS and kinds and kinds[-1] == kind):
            kinds.append(kind)
        if isinstance(update, AgentMessageChunk):
            if update.content.type != "text":
                raise RuntimeError(f"non-text agent message chunk: {update!r}")
            text.append(update.content.text)
        elif isinstance(update, ToolCallStart):
            if update.tool_call_id in tool_calls:
                raise RuntimeError(f"tool_call {update.tool_call_id} announced twice")
            tool_calls[update.tool_call_id] = {
                "id": update.tool_call_id,
                "title": update.title,
                "kind": update.kind,
                "status": update.status,
            }
        elif isinstance(update, ToolCallProgress):
            call = tool_calls.get(update.tool_call_id)
            if call is None:
                raise RuntimeError(f"tool_call_update for unannounced call {update.tool_call_id}")
            for field in ("title", "kind", "status"):
                value = getattr(update, field)
                if value is not None:
                    call[field] = value
    return {
        "updates": kinds,
        "toolCalls": list(tool_calls.values()),
        "permissionRequests": client.permission_requests,
        "text": "".join(text),
    }


async def run(command: list[str], cwd: str, wire: WireCheck) -> dict[str, Any]:
    client = Client()
    async with spawn_agent_process(
        client,
        command[0],
        *command[1:],
        env=dict(os.environ),
        cwd=cwd,
        # Let the agent's log lines reach our stderr instead of filling a pipe.
        transport_kwargs={"stderr": None},
        observers=[wire.observe],
    ) as (conn, _process):
        return await converse(conn, client, cwd)


async def run_ws(url: str, cwd: str, wire: WireCheck) -> dict[str, Any]:
    from acp.ws import create_websocket_stream

    token = os.environ["PINCER_GATEWAY_TOKEN"]
    transport = await create_websocket_stream(url, headers={"Authorization": f"Bearer {token}"})
    client = Client()
    conn = connect_to_agent(client, transport, observers=[wire.observe])
    try:
        return await converse(conn, client, cwd)
    finally:
        await conn.close()


async def converse(conn: Any, client: Client, cwd: str) -> dict[str, Any]:
    init = await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(),
        client_info=Implementation(name="acp-python-client", version="0"),
    )
    session = await conn.new_session(cwd=cwd, mcp_servers=[])
    response = await conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)])
    summary = summarize(client, session.session_id)
    return {
        "protocolVersion": init.protocol_version,
        "agentName": init.agent_info.name if init.agent_info else None,
        "stopReason": response.stop_reason,
        **summary,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cwd", required=True, help="the project directory (session cwd)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for the whole run")
    parser.add_argument("--ws", help="an ACP websocket endpoint instead of an agent command")
    parser.add_argument("command", nargs="*", help="the agent command and its arguments")
    args = parser.parse_args()
    if bool(args.ws) == bool(args.command):
        parser.error("give either --ws URL or an agent command")

    complaints = Complaints()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger().addHandler(complaints)
    logging.captureWarnings(True)
    warnings.simplefilter("default")

    wire = WireCheck()
    session = run_ws(args.ws, args.cwd, wire) if args.ws else run(args.command, args.cwd, wire)
    result = asyncio.run(asyncio.wait_for(session, args.timeout))
    result["sdkComplaints"] = complaints.messages
    result["lossyFields"] = wire.problems
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
