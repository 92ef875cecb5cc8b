"""Reading the stack's bucket from the user's machine, with the standard library: Cloud Storage's JSON API and the
caller's own gcloud token (remote/pipeline/capacity.py `access_token`: the gcloud the IAP tunnel needs anyway), never
logged. $STORAGE_EMULATOR_HOST, which Google's own clients honour, points it at another API, without a token (the
tests: rehearsal/storage_iam.py's emulator, where the address is the identity).

Reads only: list, read a small object, download an object from a byte offset (a `Range` request), so a broken
download continues where it stopped.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from remote.pipeline.capacity import access_token
from remote.ssh.errors import EXIT_FAILED, RemoteError

DEFAULT_API = "https://storage.googleapis.com"
TIMEOUT_S = 60.0
_CHUNK = 1 << 20


class BucketError(RemoteError):
    """Cloud Storage refused or could not be reached; one line that says what to do."""

    exit_code = EXIT_FAILED


def split(url: str) -> tuple[str, str]:
    """gs://BUCKET/NAME → (BUCKET, NAME)."""
    bucket, _, name = url.removeprefix("gs://").partition("/")
    return bucket, name


@dataclass
class Gcs:
    api: str
    token_source: Callable[[], str] | None  # None: the API needs no token (an emulator)
    _token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "Gcs":
        emulator = environ.get("STORAGE_EMULATOR_HOST")
        return cls(emulator.rstrip("/"), None) if emulator else cls(DEFAULT_API, access_token)

    def _open(self, path: str, headers: dict[str, str] | None = None):
        headers = dict(headers or {})
        if self.token_source is not None:
            self._token = self._token or self.token_source()
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(f"{self.api}{path}", headers=headers)
        return urllib.request.urlopen(request, timeout=TIMEOUT_S)

    def _call(self, path: str, what: str, headers: dict[str, str] | None = None):
        try:
            return self._open(path, headers)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            said = _message(error)
            fix = "your account needs roles/storage.objectViewer on the bucket" if error.code in (401, 403) else "retry"
            raise BucketError(f"Cloud Storage answered {error.code} to {what} ({said}); {fix}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise BucketError(f"Cloud Storage is unreachable for {what} ({reason}); check the network, retry") from None

    def listing(self, url: str) -> tuple[dict[str, dict], list[str]]:
        """What lies directly under the prefix `url` (gs://B/P/): its objects (name → the API's object resource) and
        the names of its sub-prefixes."""
        bucket, prefix = split(url.rstrip("/") + "/")
        objects: dict[str, dict] = {}
        prefixes: list[str] = []
        page: str | None = None
        while True:
            query = {"prefix": prefix, "delimiter": "/", **({"pageToken": page} if page else {})}
            response = self._call(f"/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(query)}", f"a listing of {url}")
            if response is None:
                raise BucketError(f"bucket {bucket} does not exist (destroyed?); nothing to read in {url}")
            with response:
                body = json.load(response)
            objects.update({item["name"][len(prefix) :]: item for item in body.get("items", [])})
            prefixes += [p[len(prefix) :].rstrip("/") for p in body.get("prefixes", [])]
            page = body.get("nextPageToken")
            if not page:
                return objects, sorted(prefixes)

    def read(self, url: str) -> bytes | None:
        """A small object's bytes; None if there is none."""
        response = self._call(_media(url), f"a read of {url}")
        if response is None:
            return None
        with response:
            return response.read()

    def download(self, url: str, dest: Path, on_bytes: Callable[[int], None] = lambda n: None) -> None:
        """Append the object's bytes to `dest` from `dest`'s size on: a partial file continues."""
        offset = dest.stat().st_size if dest.exists() else 0
        response = self._call(_media(url), f"a download of {url}", {"Range": f"bytes={offset}-"} if offset else None)
        if response is None:
            raise BucketError(f"{url} is gone from the bucket; run the command again")
        with response, open(dest, "ab") as out:
            if offset and response.status != 206:  # the whole object came back: start the file again
                out.truncate(0)
            try:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    on_bytes(len(chunk))
            except OSError as error:
                broke = f"the download of {url} broke off ({error}); run the command again to continue"
                raise BucketError(broke) from None


def _media(url: str) -> str:
    bucket, name = split(url)
    return f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"


def _message(error: urllib.error.HTTPError) -> str:
    try:
        return json.loads(error.read())["error"]["message"].splitlines()[0]
    except (ValueError, KeyError, TypeError, IndexError, OSError):
        return error.reason if isinstance(error.reason, str) else "no message"
