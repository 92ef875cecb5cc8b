"""One authenticated GET of Compute Engine's API with the caller's gcloud token (standard library), and why it could
not be read: what `vm_state`, `reservation` and `preemptions` ask, each turning `Unread` into its own unknown."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Callable

from remote.pipeline.capacity import CapacityError


class Unread(Exception):
    """Why the answer could not be read, in a few words; `status`: the HTTP code where Compute Engine answered one."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.status = reason, status


def get(url: str, token: Callable[[], str]) -> Any:
    """The JSON Compute Engine answers at `url`; raises Unread (no token, an HTTP error, no answer, not JSON)."""
    try:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token()}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)
    except CapacityError as error:  # no gcloud token
        raise Unread(str(error)) from None
    except urllib.error.HTTPError as error:
        raise Unread(f"Compute Engine answered {error.code}", error.code) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise Unread(f"Compute Engine unreachable: {type(error).__name__}") from None
