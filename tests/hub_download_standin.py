"""A stand-in for the Hugging Face Hub, for tests that run `hf download` against it via HF_ENDPOINT.

Tests have no network and no Hub account, yet the pipeline's download step (huggingface_hub's CLI) must be
exercised for real: the token it sends, where the files land in the cache, what it says when access is refused.
This serves one model repo over plain HTTP with just what huggingface_hub 1.14's snapshot_download and
hf_hub_download ask for:

- GET /api/models/<repo>[/revision/<rev>]: the repo's commit and the list of its files ("siblings");
- HEAD and GET /<repo>/resolve/<rev>/<file>: the file, with X-Repo-Commit, ETag and Content-Length;
- GET /api/models/<repo>/auth-check: 200 for the repo's token (as `HfApi.auth_check`, and tpu-sft's data preflight,
  ask), 403 GatedRepo for a token of an account not granted access (`ungranted`).

Errors carry the X-Error-Code / X-Error-Message headers by which huggingface_hub tells them apart, as the Hub's do.
No X-Xet-Hash is ever sent, so the client downloads over plain HTTP rather than through Xet storage. It does not
enforce what a real gated repo also checks: the account behind a token (a token is granted or not as it is named
here), its scopes, or rate limits.
"""

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True)
class Request:
    """One request the stand-in received."""

    method: str
    path: str  # as sent, query string included
    authorization: str | None


@dataclass
class Hub:
    """A running stand-in: where it listens, the commit it serves, and every request it has had so far."""

    endpoint: str
    commit: str
    requests: list[Request] = field(default_factory=list)


@dataclass(frozen=True)
class _Repo:
    repo_id: str
    files: dict[str, bytes]
    token: str | None
    hub: Hub
    ungranted: frozenset[str] = frozenset()  # tokens the Hub knows whose account has not accepted the licence


class _Server(ThreadingHTTPServer):
    def __init__(self, repo: _Repo) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repo = repo


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so that httpx's pooled connections are kept alive, as with the Hub; every reply sets Content-Length.
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def log_message(self, format: str, *args: object) -> None:
        pass  # The test reads Hub.requests; a line per request on stderr would only bury its output.

    def _serve(self, head: bool) -> None:
        assert isinstance(self.server, _Server)
        repo = self.server.repo
        authorization = self.headers.get("Authorization")
        repo.hub.requests.append(Request(self.command, self.path, authorization))

        path = unquote(urlsplit(self.path).path)
        if authorization in {f"Bearer {t}" for t in repo.ungranted}:
            message = f"Access to model {repo.repo_id} is restricted and you are not in the authorized list."
            self._error(HTTPStatus.FORBIDDEN, "GatedRepo", message, head)
            return
        if repo.token is not None and authorization != f"Bearer {repo.token}":
            self._refuse(repo.repo_id, authorization, head)
            return
        if path == f"/api/models/{repo.repo_id}/auth-check":
            self._reply(HTTPStatus.OK, {"Content-Type": "application/json"}, b"{}", head)
            return

        api = re.fullmatch(r"/api/models/(.+?)(?:/revision/([^/]+))?", path)
        resolve = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
        if api is not None:
            repo_id, revision = api.group(1), api.group(2) or "main"
        elif resolve is not None:
            repo_id, revision = resolve.group(1), resolve.group(2)
        else:
            self._error(HTTPStatus.NOT_FOUND, None, "Not Found", head)
            return
        if repo_id != repo.repo_id:
            self._error(HTTPStatus.NOT_FOUND, "RepoNotFound", "Repository not found", head)
            return
        if revision not in ("main", repo.hub.commit):
            self._error(HTTPStatus.NOT_FOUND, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            return

        commit = {"X-Repo-Commit": repo.hub.commit}
        if api is not None:
            info = {"id": repo.repo_id, "sha": repo.hub.commit, "siblings": [{"rfilename": f} for f in repo.files]}
            self._reply(HTTPStatus.OK, {**commit, "Content-Type": "application/json"}, json.dumps(info).encode(), head)
            return
        assert resolve is not None
        content = repo.files.get(resolve.group(3))
        if content is None:
            # The Hub names the commit on a missing file too; the client records the absence under that commit.
            self._error(HTTPStatus.NOT_FOUND, "EntryNotFound", "Entry not found", head, commit)
            return
        headers = {
            **commit,
            # The client names the cached blob after the ETag; the Hub's is the sha256 for an LFS file.
            "ETag": f'"{hashlib.sha256(content).hexdigest()}"',
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
        }
        # The client asks for a range only to resume an interrupted download ("bytes=N-"); anything else gets it all.
        wanted = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        start = int(wanted.group(1)) if wanted is not None else 0
        if 0 < start < len(content):
            headers["Content-Range"] = f"bytes {start}-{len(content) - 1}/{len(content)}"
            self._reply(HTTPStatus.PARTIAL_CONTENT, headers, content[start:], head)
        else:
            self._reply(HTTPStatus.OK, headers, content, head)

    def _refuse(self, repo_id: str, authorization: str | None, head: bool) -> None:
        if authorization is None:
            # What the Hub says to an anonymous request for a gated repo: the client raises GatedRepoError.
            message = (
                f"Access to model {repo_id} is restricted. You must have access to it and be authenticated to access"
                " it. Please log in."
            )
            self._error(HTTPStatus.UNAUTHORIZED, "GatedRepo", message, head)
        else:
            # What the Hub says to a token it does not know, with no error code: the client raises a plain 401
            # HfHubHTTPError, and the CLI prints its status line and this message.
            self._error(HTTPStatus.UNAUTHORIZED, None, "Invalid credentials in Authorization header", head)

    def _error(
        self, status: HTTPStatus, code: str | None, message: str, head: bool, extra: dict[str, str] | None = None
    ) -> None:
        headers = {**(extra or {}), "Content-Type": "application/json", "X-Error-Message": message}
        if code is not None:
            headers["X-Error-Code"] = code
        self._reply(status, headers, json.dumps({"error": message}).encode(), head)

    def _reply(self, status: HTTPStatus, headers: dict[str, str], body: bytes, head: bool) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        # On HEAD too: the client takes the file's size from it.
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


@contextmanager
def serving(
    repo_id: str, files: dict[str, bytes], token: str | None = None, ungranted: frozenset[str] = frozenset()
) -> Iterator[Hub]:
    """Serve `files` as model repo `repo_id` ("owner/name") on 127.0.0.1 until the block ends.

    With `token`, every request must carry `Authorization: Bearer <token>`, as for a gated repo; others get 401, and
    a token in `ungranted` 403 GatedRepo (a known account that has not accepted the licence).
    `files` must not be empty: for an empty file list the client would fall back to the tree API, not served here.
    """
    if not files:
        raise ValueError("a repo with no files makes the client list its tree, which the stand-in does not serve")
    # A commit derived from the content, so that the same repo gets the same snapshot folder in every run.
    digest = hashlib.sha1(repo_id.encode())
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    hub = Hub(endpoint="", commit=digest.hexdigest())
    server = _Server(_Repo(repo_id, dict(files), token, hub, frozenset(ungranted)))
    hub.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="hub-standin", daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
