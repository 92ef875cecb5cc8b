"""A local stand-in for the Compute Engine API's reads of a flex-start slice's resize request and its group. No
Compute Engine exists here, so this is a stand-in, not the real thing: it answers the two GETs
remote/pipeline/capacity.py makes, at their real paths and in the v1 JSON shapes, and records every request.

Enforced, as Google does: the bearer token (401 without the one gcloud gave); a request or group other than the
one it holds is 404. The request's state follows a script, one state per read of the request, through the
documented states (CREATING, ACCEPTED, SUCCEEDED, FAILED, CANCELLED; the last one stays); the group's hosts appear
when the request succeeds, all at once (a resize request's promise), and FAILED carries `status.error`.

Not enforced: IAM (any holder of the token may read; the caller's own rights are Google's to check), operations,
rate limits, and what the state was between two reads (Google's own timing is not modelled).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.standin_http import reply_json

TOKEN = "ya29.standin-caller-token-0123456789"


class ResizeRequestStandin:
    def __init__(self, path: str, states: list[str], hosts: int, error: str = ""):
        self.path, self.states, self.hosts, self.error = path, list(states), hosts, error
        self.group_path = path.rsplit("/resizeRequests/", 1)[0]
        self.requests: list[tuple[str, str, str]] = []  # (method, path, authorization)
        self.reads = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def state(self) -> str:
        return self.states[min(self.reads, len(self.states)) - 1] if self.reads else "CREATING"

    def __enter__(self) -> "ResizeRequestStandin":
        self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, path: str) -> tuple[int, dict]:
        if path == f"/compute/v1/{self.path}":
            self.reads += 1
            body: dict = {"kind": "compute#instanceGroupManagerResizeRequest", "state": self.state}
            body["name"] = self.path.rsplit("/", 1)[1]
            if self.state == "FAILED" and self.error:
                body["status"] = {
                    "error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": self.error}]}
                }
            return 200, body
        if path == f"/compute/v1/{self.group_path}":
            made = self.hosts if self.state == "SUCCEEDED" else 0
            return 200, {"targetSize": self.hosts, "currentActions": {"none": made, "creating": 0}}
        return 404, {"error": {"code": 404, "message": f"The resource '{path}' was not found"}}

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                authorization = self.headers.get("Authorization", "")
                standin.requests.append(("GET", self.path, authorization))
                if authorization != f"Bearer {TOKEN}":
                    code, body = 401, {"error": {"code": 401, "message": "Request had invalid authentication"}}
                else:
                    code, body = standin._answer(self.path)
                reply_json(self, code, body)

            def do_POST(self):  # noqa: N802
                standin.requests.append(("POST", self.path, self.headers.get("Authorization", "")))
                reply_json(self, 405, {})

            do_DELETE = do_POST  # noqa: N815

            def log_message(self, *_):
                pass

        return Handler
