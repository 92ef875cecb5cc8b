"""The publish settings (opt-in; nothing is published unless a destination is set): where the kept model goes
after the export phase, and the Hub write token, which is only ever a Pulumi secret."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Mapping

from workload.config import ConfigError, parse_bool, parse_pattern, stack_key

if TYPE_CHECKING:
    from infra.settings import Settings

KEYS = ("publishGcsUri", "publishHubRepo", "publishHubPublic", "hfWriteToken")
_GCS_URI = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,221}[a-z0-9](/[^\s]*)?$")
_HUB_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def parse(get: Callable[[str], Any], secret_keys: frozenset[str]) -> dict[str, Any]:
    """Settings field → value, for the keys that are set."""
    values: dict[str, Any] = {}
    if get("publishGcsUri") is not None:
        values["publish_gcs_uri"] = parse_pattern(
            "publishGcsUri", get("publishGcsUri"), _GCS_URI, "a gs://BUCKET/PATH address", "gs://my-bucket/models/gemma-sft")
    if get("publishHubRepo") is not None:
        values["publish_hub_repo"] = parse_pattern(
            "publishHubRepo", get("publishHubRepo"), _HUB_REPO, "a Hub repo id (OWNER/NAME)", "my-org/gemma3-4b-sft")
    if get("publishHubPublic") is not None:
        values["publish_hub_public"] = parse_bool("publishHubPublic", get("publishHubPublic"))
    if get("hfWriteToken") is not None:
        if stack_key("hfWriteToken") not in secret_keys:
            raise ConfigError(
                stack_key("hfWriteToken"), "is stored in plain text",
                "pulumi config rm tpu-sft:hfWriteToken && pulumi config set --secret tpu-sft:hfWriteToken <token>",
            )
        values["hf_write_token"] = get("hfWriteToken")
    return values


def require_write_token(hub_repo: str | None, write_token: str | None, *, is_update: bool,
                        environ: Mapping[str, str]) -> None:
    """Publishing to the Hub needs a write token: an update without one fails before anything is created."""
    if is_update and hub_repo and not write_token and not environ.get("HF_WRITE_TOKEN"):
        raise ConfigError(
            stack_key("hfWriteToken"),
            f"is not set and $HF_WRITE_TOKEN is empty, but tpu-sft:publishHubRepo is {hub_repo}",
            "pulumi config set --secret tpu-sft:hfWriteToken (a token with write access), or export HF_WRITE_TOKEN",
        )


def destinations(s: Settings) -> dict[str, Any]:
    """Where the publish task sends the model: one of its inputs (infra/publish.py), and a row of the plan."""
    return {"gcs": s.publish_gcs_uri, "hub": s.publish_hub_repo, "public": s.publish_hub_public}
