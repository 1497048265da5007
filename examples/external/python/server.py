"""The HTTP side of a Python external agent, with the standard library only.

agentplane POSTs each run to the agent as JSON: {"run", "goal", "context",
"gateway"}. serve(answer) listens on 127.0.0.1:$PORT (default 9100; 0 picks
a free port), prints "listening on <url>" once it does, and answers a run
with 200 {"output": {"answer": ...}, "outcome": "answered"}, answer's
result being the answer. When answer raises, the run is answered 500
{"error": ...}: the attempt failed, and agentplane starts another. answer
may be a plain function or a coroutine function.
"""

import asyncio
import inspect
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def prompt(run):
    """The user message of a run: its goal, and its context when it has one."""
    if run.get("context"):
        return f"{run['goal']}\n\nContext: {json.dumps(run['context'])}"
    return run["goal"]


def serve(answer):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            try:
                run = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            except ValueError:
                return self.reply(400, {"error": "the body is not JSON"})
            try:
                result = answer(run)
                if inspect.isawaitable(result):
                    result = asyncio.run(result)
            except Exception as err:
                print(f"run {run.get('run', {}).get('id')} failed: {err}", file=sys.stderr, flush=True)
                return self.reply(500, {"error": str(err)})
            self.reply(200, {"output": {"answer": result}, "outcome": "answered"})

        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):
            pass  # agentplane records every run; no access log here

    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "9100"))), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
