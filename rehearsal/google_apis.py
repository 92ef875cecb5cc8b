"""A stand-in for Google's APIs as a project that has just enabled them answers: every call to an API is refused for
`delay_s` after the API was enabled, and Compute Engine makes the `default` network on the first request it answers.
Nothing of Google's APIs runs off Google Cloud, so this is a stand-in for the reads remote/pipeline/apis_ready.py makes,
at their real paths, with Google's refusal.

Rules enforced, and where they are written:
- an API answers only after it has propagated: a maintainer of the provider pulumi-gcp wraps,
  hashicorp/terraform-provider-google#2129, "even when the service usage API returns that a service is enabled, it
  can't always be used right away"; the refusal is Google's 403 with reason SERVICE_DISABLED and its sentence "If you
  enabled this API recently, wait a few minutes for the action to propagate to our systems and retry" (as quoted in
  that provider's issues; the status and reason as Google's error model, google.rpc.ErrorInfo, gives them);
- a new project's `default` network may not exist until Compute Engine's first request has made it
  (GoogleCloudPlatform/magic-modules PR #18826): here it exists from the request after the first one Compute answers.

Not enforced: how long propagation really takes (not published: `delay_s` is the test's), IAM (every caller may read),
any path but the probes', and the contents of an answer (an empty list, a network's name).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NEVER = float("inf")
# The path's first parts → the API it belongs to (remote/pipeline/apis_ready.py PROBES).
API_OF = {
    "compute/v1": "compute.googleapis.com",
    "storage/v1": "storage-api.googleapis.com",
    "v1/projects": "iam.googleapis.com",
    "v1/users": "oslogin.googleapis.com",
}


def api_of(path: str) -> str:
    return API_OF.get("/".join(path.strip("/").split("/")[:2]), "")


class GoogleApis:
    """`with GoogleApis(project, delay_s) as apis:` serves at `apis.url`; `apis.requests` records each (API, status)."""

    def __init__(self, project: str, delay_s: float, networks: tuple[str, ...] = ()):
        self.project, self.delay_s = project, delay_s
        self.enabled_at: dict[str, float] = {}
        self.networks = set(networks)
        self.compute_answered = False
        self.requests: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def enable(self, *apis: str) -> None:
        """What `gcp.projects.Service` does: the enable call returns at once; the API answers `delay_s` later."""
        now = time.monotonic()
        for api in apis:
            self.enabled_at.setdefault(api, now)

    def answer(self, path: str) -> tuple[int, dict]:
        api = api_of(path)
        with self._lock:
            since = self.enabled_at.get(api)
            if since is None or time.monotonic() - since < self.delay_s:
                return 403, _service_disabled(api, self.project)
            if api != "compute.googleapis.com":
                return 200, {"items": []}
            made_now, self.compute_answered = not self.compute_answered, True
            network = path.split("?")[0].rstrip("/").rsplit("/", 1)[1]
            if network not in self.networks:
                if made_now and network == "default":
                    self.networks.add("default")  # made by this first request, there from the next one
                return 404, {
                    "error": {
                        "code": 404,
                        "message": f"The resource 'projects/{self.project}/global/networks/{network}' was not found",
                    }
                }
            return 200, {"name": network}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        apis = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = apis.answer(self.path)
                apis.requests.append((api_of(self.path), status))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> "GoogleApis":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _service_disabled(api: str, project: str) -> dict:
    message = (
        f"{api or 'This API'} has not been used in project {project} before or it is disabled. Enable it by visiting "
        f"https://console.developers.google.com/apis/api/{api}/overview?project={project} then retry. If you enabled "
        "this API recently, wait a few minutes for the action to propagate to our systems and retry."
    )
    return {
        "error": {
            "code": 403,
            "message": message,
            "status": "PERMISSION_DENIED",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"}],
        }
    }
