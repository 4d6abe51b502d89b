#!/bin/sh
# Starts pincer, says hello and opens a session in the current directory,
# then closes stdin: pincer answers both requests and exits. Each line it
# prints is one JSON-RPC message.
pincer acp <<JSON
{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$PWD","mcpServers":[]}}
JSON
