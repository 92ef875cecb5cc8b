"""A local stand-in for the Hugging Face Hub's upload and download API. The Hub cannot be reached from here, so
this is a stand-in, not the Hub. It answers exactly the calls huggingface_hub makes for create_repo,
get_paths_info and create_commit (repo creation, paths-info, preupload, the git-LFS batch API with the "basic"
transfer, the LFS object PUT to a presigned URL, and the NDJSON commit, applied whole or not at all), and for
what transformers' from_pretrained reads: the model info and file tree (`/api/models/{repo}[/revision|/tree/...]`),
and hf_hub_download's HEAD and GET `/{repo}/resolve/{revision}/{path}`
with the headers huggingface_hub checks (`X-Repo-Commit`; a small file's `ETag`, its git blob id, and its
`Content-Length`; a large (LFS) file's 302 with `X-Linked-Etag`, its sha256, `X-Linked-Size` and a `Location` on
another host, a presigned URL, so that the client drops its token there as it does for the Hub's CDN) and the
`X-Error-Code` a missing revision, file or repo gets. It records every request and every commit (its paths), so
a test can see what was sent, in how many commits, and where the token travelled.

Rules it enforces as the Hub does: a wrong token is refused on every call (401); the upload API needs the token
(401); a private repo's files are served only with the token (401 `RepoNotFound` without one, as the Hub answers
an anonymous caller); each LFS object's sha256 is checked, a commit naming an LFS object never uploaded is
refused, and presigned URLs are checked by their signature, not a token; a README.md's YAML front matter must
parse, name a license id the Hub knows (a few, LICENSES) and give each `base_model` and `datasets` entry as a repo
id (the Hub checks many more fields), answered as the Hub answers `/api/validate-yaml`: 400 with
`{"errors": [{"message"}]}`, which huggingface_hub's `create_commit` posts README.md to before any upload and
turns into "ValueError: Invalid metadata in README.md." (huggingface_hub 1.18.0, the pinned one:
`hf_api.py` `create_commit` → `_validate_yaml`).

The metadata rule, and where it was read (2026-12-05):
- the Hub's model card spec (https://huggingface.co/docs/hub/model-cards, "Model card metadata"; the annotated
  template in huggingface/hub-docs `modelcard.md`): `datasets` lists the datasets that trained the model, by
  "dataset id from https://hf.co/datasets"; `base_model` is a model id;
- huggingface_hub 1.18.0 `repocard_data.py` `ModelCardData`: `datasets` "Should be a dataset ID found on
  https://hf.co/datasets"; `base_model` "must be the ID of a model on the Hub";
- what the Hub itself answers is a field report, not Hugging Face's text (the validator is in the Hub's private
  server): huggingface/autotrain-advanced#648 (2024-05-22) quotes its 400 for a local path in `datasets`,
  `"datasets[0]" with value "/Users/…/flowers" is not valid. If possible, use a dataset id from
  https://hf.co/datasets.` The stand-in answers that message, and decides "a repo id" by huggingface_hub's own
  client-side rule (`utils/_validators.py` `validate_repo_id`: `name` or `namespace/name`, letters, digits, `-_.`,
  at most 96 characters, no `--` or `..`, not ending in `.git`), so `gs://…` and paths are refused. Whether the Hub
  also requires the dataset to exist is not known; the stand-in does not.

The `model-index` rule (the eval results a card carries), read 2026-12-07 in the Hub's spec, huggingface/hub-docs
`modelcard.md` (commit 0d37e0c): "When present, and only then, 'model-index', 'datasets' and 'license' contents will
be verified when git pushing changes to your README.md file", and its annotated fields: `model-index` is a list of
`{name, results}`; each result's `task.type` is "Required", its `dataset.type` ("Use dataset id from
https://hf.co/datasets") and `dataset.name` are "Required", and each of its `metrics` has a "Required" `type` and
`value`. huggingface_hub 1.18.0 `repocard_data.py` `model_index_to_eval_results` reads the same keys as required
(`EvalResult`: `metric_value` "0.9 or '20.0 ± 1.2'", a number or a string). The stand-in refuses a model-index that
is not such a list, a missing required field, a `dataset.type` that is no repo id (by the rule above), a value that is
neither a number nor a string, and a result with no metrics. Its messages are its own: the Hub's wording for
model-index errors was not found. It does not check `task.type` against the Hub's task ids, `metrics[].type` against
its metric ids, or that the dataset exists.

Rules it does not enforce: one token
for everything (no read-only tokens, users, organisations or repo permissions; an authenticated caller sees
every repo), no gated repos, no .gitattributes (a file is LFS when it is at least LFS_FROM bytes, not by the
Hub's patterns), no Xet storage (it offers the "basic" LFS transfer only), no rate limits, no revisions other
than `main` and the head commit's id, no history (a commit replaces the files it names), no repo renames.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import yaml

from tests.standin_http import reply_json
from workload.publish.hub import git_blob_id

LICENSES = {"gemma", "apache-2.0", "mit", "other"}  # a few of the Hub's license ids, gemma among them
LFS_FROM = 10_000  # bytes: smaller files are committed as regular git blobs, as the Hub decides for small text


# huggingface_hub 1.18.0 utils/_validators.py REPO_ID_REGEX, with validate_repo_id's further rules below.
REPO_ID = re.compile(r"^(\b[\w\-.]+\b/)?\b[\w\-.]{1,96}\b$")


def is_repo_id(value: object) -> bool:
    """A Hub repo id as huggingface_hub's validate_repo_id accepts one: `name` or `namespace/name`."""
    if not isinstance(value, str) or value.count("/") > 1 or not REPO_ID.match(value):
        return False
    return "--" not in value and ".." not in value and not value.endswith(".git")


def model_index_problems(index: object) -> list[str]:
    """What the Hub's spec requires of `model-index` (the module's docstring), each missing or malformed field named by
    its path."""
    if not isinstance(index, list) or not index:
        return ['"model-index" must be a list of {name, results}']
    problems = []

    def need(value: object, path: str, kind: type | tuple[type, ...] = str) -> None:
        if not isinstance(value, kind) or isinstance(value, bool) or value in ("", []):
            problems.append(f'"{path}" is required' if value is None else f'"{path}" with value {value!r} is not valid')

    for i, model in enumerate(index):
        if not isinstance(model, dict):
            problems.append(f'"model-index[{i}]" must be a mapping with name and results')
            continue
        need(model.get("name"), f"model-index[{i}].name")
        results = model.get("results")
        need(results, f"model-index[{i}].results", list)
        for j, result in enumerate(results if isinstance(results, list) else []):
            at = f"model-index[{i}].results[{j}]"
            if not isinstance(result, dict):
                problems.append(f'"{at}" must be a mapping with task, dataset and metrics')
                continue
            task, dataset = result.get("task") or {}, result.get("dataset") or {}
            need(task.get("type") if isinstance(task, dict) else None, f"{at}.task.type")
            kind = dataset.get("type") if isinstance(dataset, dict) else None
            need(kind, f"{at}.dataset.type")
            if isinstance(kind, str) and kind and not is_repo_id(kind):
                problems.append(
                    f'"{at}.dataset.type" with value "{kind}" is not a dataset id from https://hf.co/datasets'
                )
            need(dataset.get("name") if isinstance(dataset, dict) else None, f"{at}.dataset.name")
            metrics = result.get("metrics")
            need(metrics, f"{at}.metrics", list)
            for k, metric in enumerate(metrics if isinstance(metrics, list) else []):
                metric = metric if isinstance(metric, dict) else {}
                need(metric.get("type"), f"{at}.metrics[{k}].type")
                need(metric.get("value"), f"{at}.metrics[{k}].value", (int, float, str))
    return problems


def _signature(purpose: str, oid: str) -> str:
    return hashlib.sha256(f"stand-in presigned {purpose} {oid}".encode()).hexdigest()[:16]


@dataclass
class HubStandin:
    token: str
    repos: dict[str, dict] = field(default_factory=dict)  # repo id → {"private", "head", "files": {path: info}}
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
                if parts[0] in ("lfs-upload", "lfs-files"):
                    # As the Hub's LFS URLs are presigned storage URLs: authorised by the URL, not a token.
                    if parse_qs(url.query).get("signature") != [_signature(parts[0], parts[1])]:
                        return reply_json(self, 403, {"error": "SignatureDoesNotMatch"})
                    if self.command == "PUT" and parts[0] == "lfs-upload":
                        return self._put_object(parts[1], body)
                    if self.command in ("GET", "HEAD") and parts[0] == "lfs-files" and parts[1] in hub.lfs:
                        return self._send(200, hub.lfs[parts[1]], {})
                    return reply_json(self, 404, {"error": "NoSuchKey"})
                given = self.headers.get("Authorization")
                if given is not None and given != f"Bearer {hub.token}":
                    return self._error(401, "Invalid credentials in Authorization header")
                try:
                    if self.command in ("GET", "HEAD") and len(parts) >= 5 and parts[2] == "resolve":
                        return self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]), given is not None)
                    if self.command == "GET" and parts[:2] == ["api", "models"]:
                        return self._read_api("/".join(parts[2:4]), parts[4:], given is not None)
                    if given is None:
                        return self._error(401, "Invalid credentials in Authorization header")
                    if self.command == "POST" and path == "/api/repos/create":
                        return self._create(json.loads(body))
                    if self.command == "POST" and path == "/api/validate-yaml":
                        return self._validate_card(json.loads(body)["content"])
                    if self.command == "POST" and path.endswith(".git/info/lfs/objects/batch"):
                        return self._batch(json.loads(body))
                    if self.command == "POST" and parts[:2] == ["api", "models"]:
                        repo, verb = "/".join(parts[2:4]), parts[4]
                        if repo not in hub.repos:
                            return self._error(404, f"Repository {repo} not found", "RepoNotFound")
                        if verb == "paths-info":
                            return self._paths_info(repo, parse_qs(body.decode()))
                        if verb == "preupload":
                            return self._preupload(json.loads(body))
                        if verb == "commit":
                            return self._commit(repo, body)
                except (ValueError, KeyError, IndexError) as error:
                    return reply_json(self, 400, {"error": f"bad request: {error}"})
                reply_json(self, 404, {"error": f"the stand-in does not answer {self.command} {path}"})

            def _send(self, code: int, data: bytes, headers: dict[str, str]) -> None:
                self.send_response(code)
                for name, value in {"Content-Length": str(len(data)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _error(self, code: int, message: str, error_code: str | None = None, **headers: str) -> None:
                extra = {"X-Error-Message": message, **({"X-Error-Code": error_code} if error_code else {}), **headers}
                self._send(code, json.dumps({"error": message}).encode(), {"Content-Type": "application/json", **extra})

            def _readable(self, repo: str, authorised: bool) -> dict | None:
                found = hub.repos.get(repo)
                if found is None or (found["private"] and not authorised):
                    # The Hub's answer to an anonymous caller, for a missing and a private repo alike.
                    self._error(401, "Invalid username or password.", "RepoNotFound")
                    return None
                return found

            def _read_api(self, repo: str, rest: list[str], authorised: bool) -> None:
                """Model info (`/api/models/{repo}`, `.../revision/{rev}`) and the file tree
                (`.../tree/{rev}/{path}`), which transformers reads beside the files (additional chat templates)."""
                found = self._readable(repo, authorised)
                if found is None:
                    return None
                if rest[:1] not in ([], ["revision"], ["tree"]) or (rest and rest[1] not in ("main", found["head"])):
                    return self._error(404, f"Invalid rev id: {'/'.join(rest[1:2])}", "RevisionNotFound")
                if rest[:1] != ["tree"]:
                    siblings = [{"rfilename": path} for path in found["files"]]
                    info = {"id": repo, "sha": found["head"], "private": found["private"], "siblings": siblings}
                    return reply_json(self, 200, info)
                folder = "/".join(rest[2:])
                under = [p for p in found["files"] if not folder or p.startswith(folder + "/")]
                if folder and not under:
                    return self._error(404, f"{folder} does not exist on main", "EntryNotFound")
                # Not recursive, as the Hub's default: the files at that level and the folders below it.
                depth = folder.count("/") + 1 if folder else 0
                level = {"/".join(p.split("/")[: depth + 1]) for p in under}
                entries = [
                    {"type": "file", "path": p, **found["files"][p]}
                    if p in found["files"]
                    else {"type": "directory", "path": p}
                    for p in sorted(level)
                ]
                reply_json(self, 200, entries)

            def _resolve(self, repo: str, revision: str, path: str, authorised: bool) -> None:
                found = self._readable(repo, authorised)
                if found is None:
                    return None
                head = found["head"]
                if revision not in ("main", head):
                    return self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
                info = found["files"].get(path)
                if info is None:
                    return self._error(404, "Entry not found", "EntryNotFound", **{"X-Repo-Commit": head})
                if "lfs" not in info:
                    data = hub.blobs[(repo, path)]
                    return self._send(200, data, {"X-Repo-Commit": head, "ETag": f'"{info["oid"]}"'})
                oid = info["lfs"]["oid"]
                # Another host than the API's (localhost, not 127.0.0.1), as the Hub's CDN is: the client sends no
                # token there.
                location = f"http://localhost:{hub.port}/lfs-files/{oid}?signature={_signature('lfs-files', oid)}"
                headers = {
                    "X-Repo-Commit": head,
                    "ETag": f'"{info["oid"]}"',
                    "X-Linked-Etag": f'"{oid}"',
                    "X-Linked-Size": str(info["size"]),
                    "Location": location,
                }
                self._send(302, b"", headers)

            do_GET = do_HEAD = do_POST = do_PUT = _handle

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
                hub.repos[repo] = {"private": private, "head": "0" * 40, "files": {}}
                reply_json(self, 200, {"url": f"http://{self.headers['Host']}/{repo}", "name": repo})

            def _validate_card(self, content: str) -> None:
                """The card's YAML front matter, as the Hub checks it before a commit with a README.md."""
                head, separator, _ = content.removeprefix("---\n").partition("\n---\n")
                try:
                    metadata = yaml.safe_load(head) if content.startswith("---\n") and separator else {}
                except yaml.YAMLError as error:
                    return reply_json(self, 400, {"errors": [{"message": f"YAML: {error}"}]})
                if not isinstance(metadata, dict):
                    return reply_json(self, 400, {"errors": [{"message": "the metadata is not a mapping"}]})
                problems = []
                if metadata.get("license", "other") not in LICENSES:
                    problems.append(f"license {metadata['license']!r} is not a license id the Hub knows")
                for key, kind in (("base_model", "model"), ("datasets", "dataset")):
                    value = metadata.get(key, [])
                    for n, entry in enumerate(value if isinstance(value, list) else [value]):
                        if not is_repo_id(entry):
                            problems.append(
                                f'"{key}[{n}]" with value "{entry}" is not valid. '
                                f"If possible, use a {kind} id from https://hf.co/{kind}s."
                            )
                if "model-index" in metadata:
                    problems += model_index_problems(metadata["model-index"])
                if problems:
                    return reply_json(self, 400, {"errors": [{"message": p} for p in problems]})
                reply_json(self, 200, {"warnings": []})

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
                            "upload": {
                                "href": f"{base}/lfs-upload/{o['oid']}?signature={_signature('lfs-upload', o['oid'])}"
                            }
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
                changes: dict[str, tuple[dict, bytes | None]] = {}  # applied only once every line is valid
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    value = item["value"]
                    if item["key"] == "file":
                        content = base64.b64decode(value["content"])
                        changes[value["path"]] = ({"size": len(content), "oid": git_blob_id(content)}, content)
                    elif item["key"] == "lfsFile":
                        if value["oid"] not in hub.lfs:
                            return reply_json(self, 400, {"error": f"LFS object {value['oid']} was never uploaded"})
                        lfs = {"oid": value["oid"], "size": value["size"], "pointerSize": 134}
                        changes[value["path"]] = ({"size": value["size"], "oid": "0" * 40, "lfs": lfs}, None)
                for path, (info, data) in changes.items():
                    hub.repos[repo]["files"][path] = info
                    if data is not None:
                        hub.blobs[(repo, path)] = data
                hub.commits.append((repo, list(changes)))
                hub.repos[repo]["head"] = f"{len(hub.commits):040x}"
                reply_json(
                    self,
                    200,
                    {
                        "commitUrl": f"http://{self.headers['Host']}/{repo}/commit/{len(hub.commits)}",
                        "commitOid": hub.repos[repo]["head"],
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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
