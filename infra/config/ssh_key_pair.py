"""The stack's one SSH key pair (how the VM trusts it: infra/config/ssh_key_trust.py; ARCHITECTURE.md, "Reaching a new
VM").

The VM's `ssh-keys` metadata takes the public key from stack config (`tpu-sft:sshPublicKey`), never from a
file on the machine that runs the program: a PR preview on a fresh runner, or a teammate's `pulumi up`, would
otherwise show and apply a key change nobody made. The private half never enters the program's inputs,
state or outputs: it stays on the machines that run `pulumi up` (at tpu-sft:sshPublicKeyPath without
`.pub`), and an update checks, before anything is created, that it is there, has no passphrase (the tasks run
unattended) and is the other half of the stack's public key.
"""

from __future__ import annotations

import os

import paramiko

from workload.core.config import ConfigError, stack_key


def public_key_fields(text: str) -> str:
    """`type base64`, without the comment: what identifies an OpenSSH public key."""
    return " ".join(text.split()[:2])


def require_private_key(private_key_path: str, public_key: str, *, is_update: bool) -> None:
    """Raise a one-line ConfigError unless an update's local private key can log in with the stack's key."""
    if not is_update:
        return  # a preview connects nowhere, and must not depend on the machine it runs on
    path = os.path.expanduser(private_key_path)
    use_it = f"pulumi config set {stack_key('sshPublicKeyPath')} <the .pub beside the stack's private key>"
    if not os.path.isfile(path):
        raise ConfigError(
            stack_key("sshPublicKeyPath"),
            f"{path} does not exist, and `pulumi up` logs in to the VM with it",
            f"put the stack's private key there (0600), or {use_it}",
        )
    try:
        key = paramiko.PKey.from_path(path)
    except (paramiko.PasswordRequiredException, TypeError):  # cryptography raises TypeError for OpenSSH-format keys
        raise ConfigError(
            stack_key("sshPublicKeyPath"),
            f"{path} is protected by a passphrase, and the post-deploy tasks run unattended",
            f"use a key without one (ssh-keygen -t ed25519 -N '' -f {path}) "
            f"and set {stack_key('sshPublicKey')} to its .pub",
        ) from None
    except (paramiko.SSHException, ValueError, OSError):
        raise ConfigError(
            stack_key("sshPublicKeyPath"),
            f"{path} is not an OpenSSH private key",
            use_it,
        ) from None
    if f"{key.get_name()} {key.get_base64()}" != public_key_fields(public_key):
        raise ConfigError(
            stack_key("sshPublicKey"),
            f"is not the public half of {path}, so `pulumi up` could not log in to the VM",
            f'pulumi config set {stack_key("sshPublicKey")} "$(cat {path}.pub)" (changes the VM\'s key for everyone), '
            f"or {use_it}",
        )
