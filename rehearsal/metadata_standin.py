"""A stand-in for one Compute Engine host's metadata server: its instance attributes, over HTTP on this machine.

It is not Google's server. The rules it enforces are the ones the code here relies on: a request without the
header `Metadata-Flavor: Google` is refused with 403; `GET /computeMetadata/v1/instance/attributes/NAME` answers
the attribute's text with 200 (and `Metadata-Flavor: Google`, as the real server answers), an attribute the host
does not have 404, anything else 404. A host reaches it by GCE_METADATA_HOST (host:port), the override Google's
client libraries honour, set in that host's sessions (rehearsal/slice_hosts.py).

What `tpu-env` holds (`tpu_env`) comes from field reports of v6e/TPU7x slices made as managed instance groups on
Compute Engine (2025–2026), not from Google's text: lines of `KEY: 'value'`, as the TPU API's own tpu-env, among
them `TPU_WORKER_ID`, `TOPOLOGY` and `HOST_BOUNDS`. A test may set any text, a broken one included (`set`).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ATTRIBUTES = "/computeMetadata/v1/instance/attributes/"


def tpu_env(worker_id: int, hosts: int, topology: str = "4x4") -> str:
    """A slice host's tpu-env as field reports show it, for a slice of `hosts` hosts in a row (HOST_BOUNDS x,y,z)."""
    return "".join(
        f"{key}: '{value}'\n"
        for key, value in (
            ("ACCELERATOR_TYPE", "v6e-16"),
            ("TOPOLOGY", topology),
            ("HOST_BOUNDS", f"1,{hosts},1"),
            ("CHIPS_PER_HOST_BOUNDS", "2,2,1"),
            ("TPU_WORKER_ID", str(worker_id)),
        )
    )


class MetadataStandin:
    """One host's metadata server on `address` (a free port): `attributes` is what it serves, changeable while it
    runs; `requests` counts the attribute reads it answered, `refused` the requests without the header."""

    def __init__(self, address: str, attributes: dict[str, str] | None = None):
        self.attributes = dict(attributes or {})
        self.requests = 0
        self.refused = 0
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802  http.server's name
                if self.headers.get("Metadata-Flavor") != "Google":
                    with standin._lock:
                        standin.refused += 1
                    self._answer(403, "Missing required header: Metadata-Flavor\n")
                    return
                name = self.path.split("?", 1)[0].removeprefix(ATTRIBUTES) if self.path.startswith(ATTRIBUTES) else ""
                with standin._lock:
                    value = standin.attributes.get(name) if name else None
                    standin.requests += 1
                if value is None:
                    self._answer(404, "Not Found\n")
                else:
                    self._answer(200, value)

            def _answer(self, code: int, text: str) -> None:
                body = text.encode()
                self.send_response(code)
                self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Type", "application/text")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args) -> None:
                pass  # the tests read `requests` and `refused`; a log line per read would bury the rehearsal's output

        self._address = address
        self._server = ThreadingHTTPServer((address, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="metadata-standin", daemon=True)
        self._thread.start()

    @property
    def host(self) -> str:
        """host:port, GCE_METADATA_HOST's form."""
        return f"{self._address}:{self._server.server_port}"

    def set(self, name: str, value: str | None) -> None:
        """Serve `value` as attribute `name` from now on; None: the host has no such attribute."""
        with self._lock:
            if value is None:
                self.attributes.pop(name, None)
            else:
                self.attributes[name] = value

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=30)
