"""How the VM trusts the stack's SSH key (infra/config/ssh_key_pair.py) for which user: instance metadata, or OS Login.

`metadata` (default, as `gcloud compute ssh` without OS Login): the key goes in the VM's `ssh-keys` metadata for
`tpu-sft:sshUser`, and OS Login is switched off on the VM. `oslogin`: for organisations whose policy
`compute.requireOsLogin` rejects `enable-oslogin: FALSE`. The key is registered to a Google account's login
profile (pulumi-gcp `oslogin.SshPublicKey`), the VM has `enable-oslogin: TRUE`, and the login user is that
account's POSIX name, which Google derives from the account, not one we choose. The setting is
`tpu-sft:sshAccess`; ARCHITECTURE.md ("Reaching a new VM") says how the pieces fit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

ACCESS_MODES = ("metadata", "oslogin")
_POSIX_NAME_LIMIT = 32


def os_login_user(account: str) -> str | None:
    """The POSIX name OS Login gives a Google user account: the e-mail with each character other than a letter
    or digit replaced by `_` (me@example.com → me_example_com). None where it cannot be derived here: a service
    account's is `sa_<its unique id>`, and a name over 32 characters is shortened by Google."""
    if account.endswith(".gserviceaccount.com"):
        return None
    name = re.sub(r"[^a-z0-9]", "_", account.lower())
    return name if len(name) <= _POSIX_NAME_LIMIT else None


def ssh_metadata(mode: str, ssh_user: str, public_key: str) -> dict[str, str]:
    if mode == "oslogin":
        return {"enable-oslogin": "TRUE"}  # the guest agent then ignores ssh-keys metadata
    return {"ssh-keys": f"{ssh_user}:{public_key}", "enable-oslogin": "FALSE"}  # OS Login would ignore the key


@dataclass(frozen=True)
class OsLoginKeyArgs:
    project: str
    account: str
    public_key: str


class OsLoginKey(pulumi.ComponentResource):
    """The stack's public key in the account's OS Login profile; `pulumi destroy` removes it from there."""

    def __init__(self, name: str, args: OsLoginKeyArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:OsLoginKey", name, None, opts)
        self.key = gcp.oslogin.SshPublicKey(
            name,
            user=args.account,
            key=args.public_key,
            project=args.project,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"fingerprint": self.key.fingerprint})
