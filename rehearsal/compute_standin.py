"""A stand-in for Compute Engine's reservations, for the program's reservation check (infra/config/google_checks.py,
remote/stack/reservation.py) under the mock engine: the rehearsal and the tests serve it on 127.0.0.1 and point
$TPU_SFT_COMPUTE_API at it, with a `gcloud` on PATH that answers `gcloud auth print-access-token`.

What it enforces, from Google's reference (cloud.google.com/compute/docs/reference/rest/beta/reservations/get and the
v1beta `Reservation` message):
- GET /compute/beta/projects/P/zones/Z/reservations/NAME only: a reservation is zonal, named within its project;
- the bearer token: none → 401 ("Request is missing required authentication credential", Google's text for a request
  without credentials); a token of an account without `compute.reservations.get` → 403 ("Required
  'compute.reservations.get' permission for 'projects/P/zones/Z/reservations/NAME'");
- an unknown name, project or zone → 404 ("The resource '…' was not found", reason notFound);
- the fields: `kind` compute#reservation, `name`, `zone` (a URL), `status` READY, `specificReservationRequired`, and
  `reservationMode`, output only: CALENDAR for a calendar-mode reservation; an ordinary one leaves it out, which the
  reference calls DEFAULT ("This is default mode").
What it does not model: the reservation's machine type and count, sharing policies, commitments, a reservation being
created or deleted (CREATING, DELETING), and every other method.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TOKEN = "ya29.standin-token"  # what the stand-in's gcloud prints and the stand-in accepts
CALENDAR, DEFAULT = "CALENDAR", "DEFAULT"
_PATH = re.compile(r"/compute/beta/projects/([^/]+)/zones/([^/]+)/reservations/([^/?]+)")


@dataclass
class Compute:
    url: str
    requests: list[str] = field(default_factory=list)  # each path asked


@dataclass(frozen=True)
class _Answers:
    reservations: Mapping[tuple[str, str, str], str]  # (project, zone, name) → CALENDAR or DEFAULT
    token: str
    denied: bool  # the token's account lacks compute.reservations.get
    compute: Compute


class _Server(ThreadingHTTPServer):
    def __init__(self, answers: _Answers) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # the test reads Compute.requests

    def do_GET(self) -> None:
        assert isinstance(self.server, _Server)
        answers = self.server.answers
        answers.compute.requests.append(self.path)
        asked = _PATH.fullmatch(self.path)
        if asked is None:
            self._error(HTTPStatus.NOT_FOUND, "notFound", f"The requested URL {self.path} was not found")
            return
        project, zone, name = asked.groups()
        resource = f"projects/{project}/zones/{zone}/reservations/{name}"
        if self.headers.get("Authorization") != f"Bearer {answers.token}":
            self._error(HTTPStatus.UNAUTHORIZED, "required", "Request is missing required authentication credential")
            return
        if answers.denied:
            self._error(
                HTTPStatus.FORBIDDEN, "forbidden", f"Required 'compute.reservations.get' permission for '{resource}'"
            )
            return
        mode = answers.reservations.get((project, zone, name))
        if mode is None:
            self._error(HTTPStatus.NOT_FOUND, "notFound", f"The resource '{resource}' was not found")
            return
        body = {
            "kind": "compute#reservation",
            "name": name,
            "zone": f"https://www.googleapis.com/compute/beta/projects/{project}/zones/{zone}",
            "status": "READY",
            "specificReservationRequired": True,
            **({"reservationMode": CALENDAR} if mode == CALENDAR else {}),
        }
        self._reply(HTTPStatus.OK, body)

    def _error(self, status: HTTPStatus, reason: str, message: str) -> None:
        self._reply(status, {"error": {"code": int(status), "message": message, "errors": [{"reason": reason}]}})

    def _reply(self, status: HTTPStatus, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving(reservations: Mapping[tuple[str, str, str], str], *, denied: bool = False) -> Iterator[Compute]:
    """Serve `reservations` ((project, zone, name) → CALENDAR or DEFAULT) on 127.0.0.1 until the block ends;
    `denied`: the caller's account may not read them."""
    compute = Compute("")
    server = _Server(_Answers(dict(reservations), TOKEN, denied, compute))
    compute.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="compute-standin", daemon=True)
    thread.start()
    try:
        yield compute
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def install_gcloud(bin_dir: Path, logged_in: bool = True) -> Path:
    """A `gcloud` in `bin_dir` that answers `auth print-access-token` as a logged-in gcloud does (the stand-in's token),
    or, `logged_in` false, as one with no account does (gcloud's own text, exit 1)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    said = (
        f"echo {TOKEN}"
        if logged_in
        else "echo 'ERROR: (gcloud.auth.print-access-token) You do not currently have an active account selected.' >&2"
        "; exit 1"
    )
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(f'#!/bin/sh\n[ "$*" = "auth print-access-token" ] || exit 2\n{said}\n')
    gcloud.chmod(0o755)
    return gcloud
