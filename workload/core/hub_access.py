"""Whether a Hugging Face token may download a gated model, asked of the Hub before any VM exists.

The Hub's own answer to that question is `GET /api/models/<repo>/auth-check` with the token as a bearer
(huggingface_hub 1.14's `HfApi.auth_check` asks the same): 200 granted; 403 with `X-Error-Code: GatedRepo` the
licence is not accepted for the token's account; 401 the token is unknown (or absent, for a gated repo). Standard
library only, so it runs in either venv. The token goes in the request's header only: never in a URL, a message
or an exception.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import dataclass

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_S = 10


@dataclass(frozen=True)
class Access:
    granted: bool | None  # None: the Hub could not be asked (no network); `why` says so
    why: str


def endpoint() -> str:
    """The Hub, or what $HF_ENDPOINT points huggingface_hub at (a mirror; the tests' stand-in)."""
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def check(repo_id: str, token: str | None) -> Access:
    request = urllib.request.Request(f"{endpoint()}/api/models/{repo_id}/auth-check")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S):
            return Access(True, f"{repo_id}: access granted")
    except urllib.error.HTTPError as error:
        code = error.headers.get("X-Error-Code")
        if error.code == 403 and code == "GatedRepo":
            return Access(False, f"the token's account has not been granted access to the gated model {repo_id}")
        if error.code == 401:
            what = "no token was given" if not token else "the Hub does not accept the token"
            return Access(False, f"{what}, and {repo_id} is gated")
        return Access(False, f"the Hub answered {error.code} for {repo_id}")
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return Access(None, f"the Hub could not be asked about {repo_id} ({type(reason).__name__})")
