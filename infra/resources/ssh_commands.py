"""The SSH command lines and addresses that reach the VM, derived from the settings: the IAP ProxyCommand and host
the post-deploy tasks use (infra/resources/tasks.py), and the `ssh` and `gcloud compute ssh` a person copies from the
stack's outputs."""

from __future__ import annotations

import shlex

from infra.config.settings import Settings


def iap_proxy_command(s: Settings, instance_name: str, port: str = "22") -> str:
    return (
        f"gcloud compute start-iap-tunnel {instance_name} {port} --listen-on-stdin "
        f"--zone={s.zone} --project={s.project} --verbosity=warning"
    )


def ssh_host(s: Settings, instance_name: str, external_ip: str | None) -> str:
    """IAP tunnels are addressed by instance name; direct access by the external IP."""
    return instance_name if s.access == "iap" else (external_ip or "")


def _shell_path(path: str) -> str:
    """Quote a path for a shell but leave a leading ~/ bare, so the reader's shell still expands it."""
    return "~/" + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)


def ssh_command(s: Settings, instance_name: str, external_ip: str | None) -> str:
    """A copy-pasteable `ssh` for a person, with the same key and path the tasks use."""
    parts = ["ssh", "-i", _shell_path(s.ssh_private_key_path)]
    if s.access == "iap":
        parts += ["-o", shlex.quote(f"ProxyCommand={iap_proxy_command(s, instance_name)}")]
    parts.append(shlex.quote(f"{s.ssh_user}@{ssh_host(s, instance_name, external_ip)}"))
    return " ".join(parts)


def gcloud_ssh_command(s: Settings, instance_name: str) -> str:
    parts = ["gcloud", "compute", "ssh", f"{s.ssh_user}@{instance_name}", f"--zone={s.zone}", f"--project={s.project}"]
    if s.access == "iap":
        parts.append("--tunnel-through-iap")
    return shlex.join(parts)
