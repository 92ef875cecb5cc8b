"""Cloud Storage with IAM for the rehearsals and tests: gcp-storage-emulator (rehearsal/gcs_emulator.py) behind a
small reverse proxy that lets a request through only if the roles the program declared for its caller on that
bucket hold every permission Google requires for it, and otherwise answers as Google does: 403, in the JSON
API's error shape, "<account> does not have <permission> access to the Google Cloud Storage bucket." (or
object).

Identity is the endpoint: the proxy opens one listener per identity, and the address a host is given stands
for the credentials its metadata server would issue to it (a VM's or a slice host's service account). Tokens
are not looked at. The emulator's own address stays open to the test itself: the project owner's view.

Enforced, as Google does:
- the permission each JSON API request needs (rehearsal/storage_requests.py), batch parts one by one; a
  request outside that map is refused, never passed;
- replacing an existing object needs storage.objects.delete besides storage.objects.create (unless the upload
  carries ifGenerationMatch=0);
- bindings: what the program declared (the mock engine's `Stack`): BucketIAMMember and BucketIAMBinding on the
  bucket named, project IAMMember and IAMBinding on every bucket; roles from rehearsal/storage_roles.py
  (Google's predefined roles) and the program's own IAMCustomRole declarations; a legacy role granted on a
  project is refused, as Google refuses it.
Not enforced (the program uses none of it, or it needs Google itself): token validation; IAM conditions (a
conditional binding that grants any storage permission raises `NotModelled` instead of being half-honoured; one
that grants none is passed over); deny policies, organization policies,
VPC Service Controls; ACLs (the program's bucket has uniform bucket-level access); project-scoped calls (list
or create buckets) are refused as unclassified; a resumable upload's data requests are checked as
storage.objects.create (Google trusts the session URI instead: stricter, never kinder); the XML API.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Mapping

from rehearsal import gcs_emulator
from rehearsal.engine import DEFAULT_COMPUTE_ACCOUNT, Stack
from rehearsal.storage_requests import Access, Unclassified, required
from rehearsal.storage_roles import PREDEFINED_ROLES

BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
BUCKET_BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
PROJECT_BINDING = "gcp:projects/iAMBinding:IAMBinding"
CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
POLICIES = ("gcp:storage/bucketIAMPolicy:BucketIAMPolicy", "gcp:projects/iAMPolicy:IAMPolicy")
HOSTS = ("gcp:compute/instance:Instance", "gcp:compute/instanceTemplate:InstanceTemplate")
BUCKET = "gcp:storage/bucket:Bucket"
EVERY_BUCKET = "*"  # a project-level binding
# Roles outside Cloud Storage's own that still hold storage permissions: never guessed, refused.
BASIC_ROLES = ("roles/owner", "roles/editor", "roles/viewer")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade"}


class NotModelled(ValueError):
    """The program declared an IAM construct this stand-in does not evaluate: it refuses to guess."""


Grants = Mapping[str, Mapping[str, frozenset[str]]]  # member → bucket (or EVERY_BUCKET) → permissions


def _custom_roles(stack: Stack) -> dict[str, frozenset[str]]:
    return {
        f"projects/{r.inputs['project']}/roles/{r.inputs['roleId']}": frozenset(r.inputs.get("permissions", []))
        for r in stack.of_type(CUSTOM_ROLE)
    }


def _permissions(role: str, custom: Mapping[str, frozenset[str]], *, on_project: bool) -> frozenset[str]:
    if role in custom:
        return frozenset(p for p in custom[role] if p.startswith("storage."))
    if role in PREDEFINED_ROLES:
        if on_project and role.startswith("roles/storage.legacy"):
            raise NotModelled(f"{role} is granted on the project: Google grants legacy roles on buckets only")
        return PREDEFINED_ROLES[role]
    if role.startswith("roles/storage.") or role in BASIC_ROLES:
        raise NotModelled(f"{role} is not in rehearsal/storage_roles.py: add its permissions from Google's list")
    return frozenset()  # another service's role: no storage.* permission


def grants_of(stack: Stack) -> dict[str, dict[str, frozenset[str]]]:
    """Every storage permission the program granted, by member and bucket."""
    if found := [r.type for r in stack.resources if r.type in POLICIES]:
        raise NotModelled(f"{found[0]} replaces a whole policy: not modelled")
    custom = _custom_roles(stack)
    grants: dict[str, dict[str, frozenset[str]]] = {}
    for resource in stack.resources:
        inputs = resource.inputs
        if resource.type not in (BUCKET_MEMBER, BUCKET_BINDING, PROJECT_MEMBER, PROJECT_BINDING):
            continue
        on_project = resource.type in (PROJECT_MEMBER, PROJECT_BINDING)
        bucket = EVERY_BUCKET if on_project else inputs["bucket"]
        permissions = _permissions(inputs["role"], custom, on_project=on_project)
        if inputs.get("condition"):
            if permissions:
                raise NotModelled(f"{resource.name} grants storage permissions under an IAM condition: not modelled")
            continue  # another service's grant under a condition: nothing of storage's to gate
        for member in inputs.get("members") or [inputs["member"]]:
            held = grants.setdefault(member, {})
            held[bucket] = held.get(bucket, frozenset()) | permissions
    return grants


def host_identity(stack: Stack) -> str:
    """The member a VM or a slice host acts as: the declared account, or the one Compute Engine attaches unasked."""
    (host,) = [r for r in stack.resources if r.type in HOSTS]
    email = (host.inputs.get("serviceAccount") or {}).get("email") or DEFAULT_COMPUTE_ACCOUNT
    return f"serviceAccount:{email}"


@dataclass(frozen=True)
class DeclaredStorage:
    """The program's checkpoint bucket, the identity its hosts act as, and every storage grant it declared."""

    bucket: str
    host: str  # a member: "serviceAccount:…"
    grants: Grants

    @classmethod
    def of(cls, stack: Stack) -> "DeclaredStorage":
        return cls(stack.one(BUCKET).inputs["name"], host_identity(stack), grants_of(stack))


def refusal(member: str, access: Access) -> str:
    """Google's words for a missing permission."""
    who = member.split(":", 1)[-1]
    return (
        f"{who} does not have {access.permission} access to the Google Cloud Storage {access.resource}. "
        f"Permission '{access.permission}' denied on resource (or it may not exist)."
    )


@dataclass
class StorageIam:
    """The emulator behind one gated listener per identity."""

    emulator: gcs_emulator.GcsEmulator
    grants: Grants
    refusals: list[str] = field(default_factory=list)  # every 403 it gave, for a failed run's evidence
    _listeners: dict[str, ThreadingHTTPServer] = field(default_factory=dict)

    def url(self, member: str) -> str:
        """The endpoint that stands for `member`'s credentials (opened on first use)."""
        if member not in self._listeners:
            listener = ThreadingHTTPServer(("127.0.0.1", 0), _Gate)
            listener.daemon_threads = True
            listener.iam, listener.member = self, member  # type: ignore[attr-defined]
            threading.Thread(target=listener.serve_forever, daemon=True).start()
            self._listeners[member] = listener
        return f"http://127.0.0.1:{self._listeners[member].server_address[1]}"

    def env(self, member: str) -> dict[str, str]:
        """What a host's clients need to reach Cloud Storage as `member`."""
        return gcs_emulator.client_env(self.url(member))

    def missing(self, member: str, needed: list[Access]) -> Access | None:
        held = self.grants.get(member, {})
        for access in needed:
            if access.permission in held.get(access.bucket, frozenset()) | held.get(EVERY_BUCKET, frozenset()):
                continue
            if access.only_if_exists is not None and not self._exists(access.bucket, access.only_if_exists):
                continue
            return access
        return None

    def _exists(self, bucket: str, name: str) -> bool:
        quoted = urllib.parse.quote(name, safe="")
        return self.emulator.status(f"/storage/v1/b/{bucket}/o/{quoted}") == 200

    def stop(self) -> None:
        """Closes every listener, then the emulator."""
        for listener in self._listeners.values():
            listener.shutdown()
            listener.server_close()
        self._listeners.clear()
        self.emulator.stop()


class _Gate(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: object) -> None:
        pass  # the refusals are kept on StorageIam; the emulator logs what it served

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refuse(self, message: str) -> None:
        iam: StorageIam = self.server.iam  # type: ignore[attr-defined]
        iam.refusals.append(f"{self.command} {self.path}: {message}")
        error = {
            "code": 403,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": "forbidden"}],
        }
        self._answer(403, [("Content-Type", "application/json; charset=UTF-8")], json.dumps({"error": error}).encode())

    def _handle(self) -> None:
        iam: StorageIam = self.server.iam  # type: ignore[attr-defined]
        member: str = self.server.member  # type: ignore[attr-defined]
        body = self._body()
        try:
            lacking = iam.missing(member, required(self.command, self.path, body, self.headers.get("Content-Type", "")))
        except Unclassified as unknown:
            self._refuse(
                f"the Cloud Storage IAM stand-in cannot tell which permission {unknown} needs: refused "
                "(add the request to rehearsal/storage_requests.py)"
            )
            return
        if lacking is not None:
            self._refuse(refusal(member, lacking))
            return
        upstream = http.client.HTTPConnection(urllib.parse.urlsplit(iam.emulator.url).netloc, timeout=300)
        try:
            # The Host header is the caller's: the emulator builds upload and media URLs from it.
            upstream.request(
                self.command,
                self.path,
                body=body,
                headers={k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP},
            )
            response = upstream.getresponse()
            self._answer(response.status, response.getheaders(), response.read())
        finally:
            upstream.close()

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


def start(declared: DeclaredStorage, log_path: Path | None = None) -> StorageIam:
    """The emulator holding the declared bucket, gated by the declared grants."""
    return StorageIam(gcs_emulator.start(declared.bucket, log_path), declared.grants)
