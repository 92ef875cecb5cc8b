"""A local stand-in for the Hugging Face Hub's upload API. The Hub cannot be reached from here, so this is a
stand-in, not the Hub: it answers exactly the calls huggingface_hub's create_repo / get_paths_info /
upload_file make (repo creation, paths-info, preupload, the git-LFS batch API with the "basic" transfer, the
LFS object PUT, and the NDJSON commit), refuses any call without the bearer token it was given (as the Hub
refuses a missing or wrong token), checks each LFS object's sha256, and records every request so that a test
can see what was sent and that the token travelled only in the Authorization header."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from tests.standin_http import reply_json
from workload.publish.hub import git_blob_id

LFS_FROM = 10_000  # bytes: smaller files are committed as regular git blobs, as the Hub decides for small text


def _signature(oid: str) -> str:
    return hashlib.sha256(f"stand-in presigned {oid}".encode()).hexdigest()[:16]


@dataclass
class HubStandin:
    token: str
    repos: dict[str, dict] = field(default_factory=dict)  # repo id → {"private": bool, "files": {path: info}}
    lfs: dict[str, bytes] = field(default_factory=dict)  # sha256 → content
    requests: list[dict] = field(default_factory=list)  # method, path, headers, body (as text)
    commits: list[tuple[str, list[str]]] = field(default_factory=list)  # repo, paths
    blobs: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (repo, path) → a regular file's content
    refuse_commits_after: int | None = None  # answer 500 to later commits: the Hub failing mid-upload

    def start(self) -> "HubStandin":
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                body = self._body()
                hub.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body.decode("utf-8", "replace"),
                    }
                )
                url = urlparse(self.path)
                path, parts = url.path, url.path.strip("/").split("/")
                if self.command == "PUT" and parts[0] == "lfs-upload":
                    # As the Hub's LFS upload URLs are presigned storage URLs: authorised by the URL, not a token.
                    if parse_qs(url.query).get("signature") != [_signature(parts[1])]:
                        return reply_json(self, 403, {"error": "SignatureDoesNotMatch"})
                    return self._put_object(parts[1], body)
                if self.headers.get("Authorization") != f"Bearer {hub.token}":
                    return reply_json(self, 401, {"error": "Invalid credentials in Authorization header"})
                try:
                    if self.command == "POST" and path == "/api/repos/create":
                        return self._create(json.loads(body))
                    if self.command == "POST" and path.endswith(".git/info/lfs/objects/batch"):
                        return self._batch(json.loads(body))
                    if self.command == "POST" and parts[:2] == ["api", "models"]:
                        repo, verb = "/".join(parts[2:4]), parts[4]
                        if repo not in hub.repos:
                            return reply_json(self, 404, {"error": f"Repository {repo} not found"})
                        if verb == "paths-info":
                            return self._paths_info(repo, parse_qs(body.decode()))
                        if verb == "preupload":
                            return self._preupload(json.loads(body))
                        if verb == "commit":
                            return self._commit(repo, body)
                except (ValueError, KeyError, IndexError) as error:
                    return reply_json(self, 400, {"error": f"bad request: {error}"})
                reply_json(self, 404, {"error": f"the stand-in does not answer {self.command} {path}"})

            do_GET = do_POST = do_PUT = _handle

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("Content-Length") or 0))
                data = b""
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    data += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
                return data

            def _create(self, request: dict) -> None:
                repo = f"{request['organization']}/{request['name']}"
                if repo in hub.repos:
                    return reply_json(self, 409, {"error": "You already created this model repo", "url": repo})
                private = request.get("visibility") == "private" or request.get("private") is True
                hub.repos[repo] = {"private": private, "files": {}}
                reply_json(self, 200, {"url": f"http://{self.headers['Host']}/{repo}", "name": repo})

            def _paths_info(self, repo: str, form: dict) -> None:
                files = hub.repos[repo]["files"]
                found = [{"type": "file", "path": p, **files[p]} for p in form.get("paths", []) if p in files]
                reply_json(self, 200, found)

            def _preupload(self, request: dict) -> None:
                reply_json(
                    self,
                    200,
                    {
                        "files": [
                            {
                                "path": f["path"],
                                "uploadMode": "lfs" if f["size"] >= LFS_FROM else "regular",
                                "shouldIgnore": False,
                            }
                            for f in request["files"]
                        ]
                    },
                )

            def _batch(self, request: dict) -> None:
                base = f"http://{self.headers['Host']}"
                objects = [
                    {"oid": o["oid"], "size": o["size"]}
                    if o["oid"] in hub.lfs
                    else {
                        "oid": o["oid"],
                        "size": o["size"],
                        "actions": {
                            "upload": {"href": f"{base}/lfs-upload/{o['oid']}?signature={_signature(o['oid'])}"}
                        },
                    }
                    for o in request["objects"]
                ]
                reply_json(self, 200, {"transfer": "basic", "objects": objects})

            def _put_object(self, oid: str, data: bytes) -> None:
                if hashlib.sha256(data).hexdigest() != oid:
                    return reply_json(self, 400, {"error": "sha256 mismatch"})
                hub.lfs[oid] = data
                reply_json(self, 200, {})

            def _commit(self, repo: str, body: bytes) -> None:
                if hub.refuse_commits_after is not None and len(hub.commits) >= hub.refuse_commits_after:
                    return reply_json(self, 500, {"error": "Internal Error"})
                files, paths = hub.repos[repo]["files"], []
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    value = item["value"]
                    if item["key"] == "file":
                        data = base64.b64decode(value["content"])
                        files[value["path"]] = {"size": len(data), "oid": git_blob_id(data)}
                        hub.blobs[(repo, value["path"])] = data
                    elif item["key"] == "lfsFile":
                        if value["oid"] not in hub.lfs:
                            return reply_json(self, 400, {"error": f"LFS object {value['oid']} was never uploaded"})
                        files[value["path"]] = {
                            "size": value["size"],
                            "oid": "0" * 40,
                            "lfs": {"oid": value["oid"], "size": value["size"], "pointerSize": 134},
                        }
                    else:
                        continue
                    paths.append(value["path"])
                hub.commits.append((repo, paths))
                reply_json(
                    self,
                    200,
                    {
                        "commitUrl": f"http://{self.headers['Host']}/{repo}/commit/{len(hub.commits)}",
                        "commitOid": f"{len(hub.commits):040x}",
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def content(self, repo: str, path: str) -> bytes:
        info = self.repos[repo]["files"][path]
        return self.lfs[info["lfs"]["oid"]] if "lfs" in info else self.blobs[(repo, path)]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "HubStandin":
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()
