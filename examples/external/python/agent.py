"""A Python agent with no framework and no dependency, run by agentplane as
an external agent: a loop over the Chat Completions API whose tools come
from the run gateway's MCP server, both spoken with urllib.

    PORT=9100 MODEL=gpt [INSTRUCTIONS=...] python3 agent.py

MODEL names one of the models the version may use; INSTRUCTIONS, when set,
is the system message of every completion.
"""

import json
import os
import urllib.error
import urllib.request

from server import prompt, serve

MODEL = os.environ.get("MODEL", "default")
INSTRUCTIONS = os.environ.get("INSTRUCTIONS")
MAX_TURNS = 10


def post(url, token, body, headers=None):
    """POSTs body as JSON with the run's token as the API key: the answer's
    headers and JSON (None when it has no body)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            data = response.read().decode()
            if response.headers.get_content_type() == "text/event-stream":
                # An MCP answer sent as a stream: its message is the last data line.
                data = [line[5:] for line in data.splitlines() if line.startswith("data:")][-1]
            return response.headers, json.loads(data) if data.strip() else None
    except urllib.error.HTTPError as err:
        # The gateway's refusals say why, in the provider's error shape.
        raise RuntimeError(f"{url}: {err.code} {err.read().decode()}") from None


class MCP:
    """A client of the gateway's MCP server (streamable HTTP)."""

    def __init__(self, url, token):
        self.url, self.token, self.headers, self.id = url, token, {}, 0
        init = self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "python-agent", "version": "1"}})
        self.headers["MCP-Protocol-Version"] = init["protocolVersion"]
        post(self.url, self.token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, self.headers)

    def rpc(self, method, params):
        self.id += 1
        headers, answer = post(self.url, self.token, {"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}, self.headers)
        if headers.get("Mcp-Session-Id"):
            self.headers["Mcp-Session-Id"] = headers["Mcp-Session-Id"]
        if "error" in answer:
            raise RuntimeError(f"MCP {method}: {answer['error']['message']}")
        return answer["result"]

    def tools(self):
        """The tools the run may call, as Chat Completions functions."""
        tools, cursor = [], None
        while True:
            page = self.rpc("tools/list", {"cursor": cursor} if cursor else {})
            tools += [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                                        "parameters": t["inputSchema"]}} for t in page["tools"]]
            cursor = page.get("nextCursor")
            if not cursor:
                return tools

    def call(self, name, arguments):
        """The text of a call's result; a refusal (isError) is text the model reads too."""
        result = self.rpc("tools/call", {"name": name, "arguments": json.loads(arguments or "{}")})
        return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


def answer(run):
    gateway = run["gateway"]
    mcp = MCP(gateway["mcp_url"], gateway["token"])
    tools = mcp.tools()
    messages = [{"role": "system", "content": INSTRUCTIONS}] if INSTRUCTIONS else []
    messages.append({"role": "user", "content": prompt(run)})
    for _ in range(MAX_TURNS):
        request = {"model": MODEL, "messages": messages}
        if tools:
            request["tools"] = tools
        _, completion = post(gateway["openai_base_url"] + "/chat/completions", gateway["token"], request)
        message = completion["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return message.get("content")
        for call in message["tool_calls"]:
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": mcp.call(call["function"]["name"], call["function"]["arguments"])})
    raise RuntimeError(f"no answer after {MAX_TURNS} completions")


if __name__ == "__main__":
    serve(answer)
