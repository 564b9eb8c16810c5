"""OpenAI-compatible endpoints on loopback for the command-line tests: real HTTP servers that list a model at
`GET /models` and do with a chat completion what the test needs (nothing: the caller's request stays in flight)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable


def models_handler(model: str, on_post: Callable[[], None] | None = None) -> type[http.server.BaseHTTPRequestHandler]:
    """A handler whose `/models` lists `model`; a POST (a chat completion) calls `on_post` and never answers."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": model, "object": "model"}]}).encode()
            self.send_response(200 if self.path.endswith("/models") else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            if on_post is not None:
                on_post()

        def log_message(self, *args):
            pass

    return Handler


def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> http.server.ThreadingHTTPServer:
    """Serve `handler` on a free loopback port in a daemon thread (shut it down with `.shutdown()`)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
