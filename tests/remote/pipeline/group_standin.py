"""A local stand-in for the Compute Engine API's managed instance group, as a flex-start slice's first task reads and
resizes it. No Compute Engine exists here, so this is a stand-in, not the real thing: it answers the GET and the
POST …/resize remote/pipeline/capacity.py makes, at their real paths and in the v1 JSON shapes, and records every
request.

Enforced, as Google does: the bearer token (401 without the one gcloud gave); a group other than the one it holds is
404; the resize sets the target size. BULK mode (every slice's group: infra/resources/slice.py): the group makes all its
hosts at once or none ("the MIG doesn't create any instance until" the capacity for all of them is there,
compute/docs/instance-groups/about-bulk-mode), so `currentActions.none` goes from 0 to the target in one reading.
Until then each reading carries the next entry of `waiting`, the reason as `status.bulkInstanceOperation.
lastProgressCheck.error` gives it (a field report's codes: tests/remote/pipeline/test_capacity.py); "" is a reading
without one. Once `waiting` is used up the hosts exist.

Not enforced: IAM (any holder of the token may read and resize; the caller's own rights are Google's to check),
operations (the resize answers its operation and is done), rate limits, and Google's own timing between readings.
"""

from __future__ import annotations

import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.standin_http import reply_json

TOKEN = "ya29.standin-caller-token-0123456789"


class GroupStandin:
    def __init__(self, path: str, waiting: list[str], target: int = 0):
        self.path, self.waiting, self.target = path, list(waiting), target
        self.hosts = 0
        self.requests: list[tuple[str, str, str]] = []  # (method, path, authorization)
        self.resizes: list[int] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "GroupStandin":
        self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _read(self) -> dict:
        status: dict = {"isStable": self.hosts == self.target}
        if self.target > self.hosts:
            if self.waiting:
                reason = self.waiting.pop(0)
                check: dict = {"timestamp": "2026-12-04T00:00:00Z"}
                if reason:
                    code, _, message = reason.partition(": ")
                    check["error"] = {"errors": [{"code": code, "message": message}]}
                status["bulkInstanceOperation"] = {"inProgress": True, "lastProgressCheck": check}
            else:
                self.hosts = self.target  # all at once
                status = {"isStable": True, "bulkInstanceOperation": {"inProgress": False}}
        return {
            "kind": "compute#instanceGroupManager",
            "name": self.path.rsplit("/", 1)[1],
            "targetSize": self.target,
            "targetSizePolicy": {"mode": "BULK"},
            "currentActions": {"none": self.hosts, "creating": self.target - self.hosts},
            "status": status,
        }

    def _answer(self, method: str, raw: str) -> tuple[int, dict]:
        url = urllib.parse.urlsplit(raw)
        if method == "GET" and url.path == f"/compute/v1/{self.path}":
            return 200, self._read()
        if method == "POST" and url.path == f"/compute/v1/{self.path}/resize":
            size = urllib.parse.parse_qs(url.query).get("size", [""])[0]
            if not size.isdigit():
                return 400, {"error": {"code": 400, "message": "Invalid value for field 'size'"}}
            self.target = int(size)
            self.hosts = min(self.hosts, self.target)
            self.resizes.append(self.target)
            return 200, {"kind": "compute#operation", "name": "operation-resize-stand-in"}
        return 404, {"error": {"code": 404, "message": f"The resource '{url.path}' was not found"}}

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                authorization = self.headers.get("Authorization", "")
                standin.requests.append((method, self.path, authorization))
                if authorization != f"Bearer {TOKEN}":
                    code, body = 401, {"error": {"code": 401, "message": "Request had invalid authentication"}}
                else:
                    code, body = standin._answer(method, self.path)
                reply_json(self, code, body)

            def do_GET(self):  # noqa: N802 (http.server's name)
                self._serve("GET")

            def do_POST(self):  # noqa: N802
                self._serve("POST")

            def log_message(self, *_):
                pass

        return Handler
