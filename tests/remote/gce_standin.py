"""A local stand-in for the two Google endpoints a VM's autostop talks to: the metadata server and the Compute
Engine API's instances.stop/delete. Neither exists off Google Cloud, so this is a stand-in, not the real thing:
it answers only the paths autostop uses, with the real paths, headers and JSON shapes, and it refuses what the
real ones refuse (metadata without `Metadata-Flavor: Google`, an API call without the bearer token it issued,
an instance other than its own), recording every request so a test can check what the VM asked for."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "ya29.standin-access-token-0123456789"


@dataclass
class GceStandin:
    project: str = "my-tpu-project"
    zone: str = "us-east5-b"
    instance: str = "tpu-sft-dev"
    attributes: dict[str, str] = field(default_factory=dict)
    refuse: int | None = None  # answer API calls with this status, as the API does without the IAM permission
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # method, path, headers
    api_times: list[float] = field(default_factory=list)  # when each stop/delete arrived (time.time())

    def start(self) -> "GceStandin":
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, code: int, body: str, kind: str = "application/text") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                standin.calls.append(("GET", self.path, dict(self.headers)))
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self._answer(403, "Missing Metadata-Flavor:Google header.")
                values = {
                    "/computeMetadata/v1/instance/service-accounts/default/token":
                        json.dumps({"access_token": TOKEN, "expires_in": 3599, "token_type": "Bearer"}),
                    "/computeMetadata/v1/instance/name": standin.instance,
                    "/computeMetadata/v1/instance/zone": f"projects/123456789012/zones/{standin.zone}",
                    "/computeMetadata/v1/project/project-id": standin.project,
                    **{f"/computeMetadata/v1/instance/attributes/{k}": v for k, v in standin.attributes.items()},
                }
                if self.path not in values:
                    return self._answer(404, "not found")
                self._answer(200, values[self.path])

            def _instance_call(self, suffix: str) -> None:
                standin.calls.append((self.command, self.path, dict(self.headers)))
                standin.api_times.append(time.time())
                expected = f"/compute/v1/projects/{standin.project}/zones/{standin.zone}/instances/{standin.instance}"
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._answer(401, json.dumps({"error": {"code": 401}}), "application/json")
                if standin.refuse:
                    return self._answer(standin.refuse, json.dumps({"error": {"code": standin.refuse}}),
                                        "application/json")
                if self.path != expected + suffix:
                    return self._answer(404, json.dumps({"error": {"code": 404}}), "application/json")
                self._answer(200, json.dumps({"kind": "compute#operation", "name": "operation-1234-stand-in"}),
                             "application/json")

            def do_POST(self) -> None:
                self._instance_call("/stop")

            def do_DELETE(self) -> None:
                self._instance_call("")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def api_calls(self) -> list[tuple[str, str, dict[str, str]]]:
        return [c for c in self.calls if c[0] in ("POST", "DELETE")]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
