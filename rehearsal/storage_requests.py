"""Which Cloud Storage IAM permissions a JSON API request needs: the map the IAM stand-in
(rehearsal/storage_iam.py) checks each request against.

Source: Google's "IAM permissions for JSON methods" (https://cloud.google.com/storage/docs/access-control/iam-json)
and "IAM permissions for Cloud Storage" (https://cloud.google.com/storage/docs/access-control/iam-permissions),
whose note says that replacing an existing object needs both storage.objects.create and storage.objects.delete.
The routes are the JSON API's (https://cloud.google.com/storage/docs/json_api/v1), as every client on the VM
calls them: tensorstore (orbax's arrays), gcsfs (etils.epath under orbax, workload/run/storage.py),
google-cloud-storage (orbax's bucket lookup, tensorboardX, workload/publish/gcs.py), including gcsfs's batch
deletes. A request outside this map raises `Unclassified`: the stand-in refuses it rather than let it through.
"""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import json
import re
import urllib.parse
from dataclasses import dataclass


class Unclassified(ValueError):
    """A request the map does not cover; the stand-in refuses it."""


@dataclass(frozen=True)
class Access:
    bucket: str
    permission: str
    resource: str  # "bucket" or "object": what Google's refusal names
    only_if_exists: str | None = None  # this object's name: needed only when it exists (an overwrite)


_BUCKET = r"(?P<bucket>[^/]+)"
_OBJECT = r"(?P<object>.+)"
_DEST = r"b/(?P<dest_bucket>[^/]+)/o/(?P<dest_object>.+)"
# What a method does to the bucket or the object its URL names: the last word of the permission it needs, the same
# for both (storage.buckets.get, storage.objects.update, …).
_ACTIONS = {"GET": "get", "HEAD": "get", "PATCH": "update", "PUT": "update", "DELETE": "delete"}


def _object(bucket: str, permission: str) -> Access:
    return Access(bucket, permission, "object")


def _created(bucket: str, name: str | None, query: dict[str, str]) -> list[Access]:
    """An object written: create, and delete too when it replaces one (unless a precondition forbids that)."""
    if not name:
        raise Unclassified("an upload that names no object")
    overwrite = (
        []
        if query.get("ifGenerationMatch") == "0"
        else [Access(bucket, "storage.objects.delete", "object", only_if_exists=name)]
    )
    return [_object(bucket, "storage.objects.create"), *overwrite]


def _payload(part: email.message.Message) -> bytes:
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else b""


def _upload_name(query: dict[str, str], body: bytes, content_type: str) -> str | None:
    if query.get("name"):
        return query["name"]
    if content_type.startswith("multipart/related"):  # metadata part first, then the media
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body
        )
        for part in message.iter_parts():
            if part.get_content_type() == "application/json":
                return json.loads(_payload(part) or b"{}").get("name")
        return None
    if body.strip().startswith(b"{"):  # a resumable upload's initiation carries the metadata as JSON
        return json.loads(body).get("name")
    return None


def _routes(method: str, path: str, query: dict[str, str], body: bytes, content_type: str) -> list[Access]:
    def match(pattern: str) -> dict[str, str] | None:
        found = re.fullmatch(pattern, path)
        return {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()} if found else None

    read = method in ("GET", "HEAD")
    if (m := match(rf"/storage/v1/b/{_BUCKET}")) and method in _ACTIONS:
        return [Access(m["bucket"], f"storage.buckets.{_ACTIONS[method]}", "bucket")]
    if m := match(rf"/storage/v1/b/{_BUCKET}/iam"):
        permission = {"GET": "storage.buckets.getIamPolicy", "PUT": "storage.buckets.setIamPolicy"}.get(method)
        if permission:
            return [Access(m["bucket"], permission, "bucket")]
    if match(rf"/storage/v1/b/{_BUCKET}/iam/testPermissions") and read:
        return []  # testIamPermissions needs no permission: it answers which of the asked ones the caller has
    if (m := match(rf"/storage/v1/b/{_BUCKET}/o")) and read:
        return [Access(m["bucket"], "storage.objects.list", "bucket")]
    if (m := match(rf"/storage/v1/b/{_BUCKET}/o/{_OBJECT}/(?:rewriteTo|copyTo)/{_DEST}")) and method == "POST":
        return [_object(m["bucket"], "storage.objects.get"), *_created(m["dest_bucket"], m["dest_object"], query)]
    if (m := match(rf"/storage/v1/b/{_BUCKET}/o/{_OBJECT}/compose")) and method == "POST":
        sources = [s["name"] for s in json.loads(body or b"{}").get("sourceObjects", [])]
        reads = [_object(m["bucket"], "storage.objects.get")] if sources else []  # sources share the bucket
        return [*reads, *_created(m["bucket"], m["object"], query)]
    if (m := match(rf"/storage/v1/b/{_BUCKET}/o/{_OBJECT}")) and method in _ACTIONS:
        return [_object(m["bucket"], f"storage.objects.{_ACTIONS[method]}")]
    if (m := match(rf"/download/storage/v1/b/{_BUCKET}/o/{_OBJECT}")) and read:
        return [_object(m["bucket"], "storage.objects.get")]
    if m := match(rf"/upload/storage/v1/b/{_BUCKET}/o"):
        if method == "POST":
            return _created(m["bucket"], _upload_name(query, body, content_type), query)
        if method == "PUT" and query.get("upload_id"):
            # A resumable session's data: Google checks the caller when the session is opened (the POST above);
            # the session URI itself is the credential from then on. Checked again here as create: stricter.
            return [_object(m["bucket"], "storage.objects.create")]
    raise Unclassified(f"{method} {path}")


def _batch(body: bytes, content_type: str) -> list[Access]:
    """gcsfs deletes in batches: each part is a whole HTTP request, classified like any other."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    needed: list[Access] = []
    for part in message.iter_parts():
        inner = _payload(part)
        head, _, inner_body = inner.replace(b"\r\n", b"\n").partition(b"\n\n")
        request_line, *header_lines = head.decode().split("\n")
        method, target = request_line.split()[:2]
        headers = dict(line.split(":", 1) for line in header_lines if ":" in line)
        inner_type = next((v.strip() for k, v in headers.items() if k.strip().lower() == "content-type"), "")
        needed += required(method, target, inner_body, inner_type)
    return needed


def required(method: str, url: str, body: bytes = b"", content_type: str = "") -> list[Access]:
    """What Google checks before it serves `method url`; raises Unclassified for a request outside the map."""
    parsed = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    if parsed.path == "/batch/storage/v1" and method == "POST":
        return _batch(body, content_type)
    return _routes(method.upper(), parsed.path, query, body, content_type)
