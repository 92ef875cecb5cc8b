"""Autostop: the VM stops (or deletes) itself once nothing has used it for `idle minutes`.

Runs on the VM as root, started at every boot by the startup script the Pulumi program declares
(infra/startup.py), which copies this one file there: it needs only the standard library of the image's
python3 and imports nothing from tpu-sft. It works with the laptop that ran `pulumi up` closed.

Every poll it reads its settings from the instance's metadata (`tpu-sft-autostop`: stop, delete or off;
`tpu-sft-idle-minutes`), so a `pulumi up` that changes them takes effect without a reboot. The VM is busy while

  - a tpu-sft job runs (a job directory under --jobs-root whose wrapper is alive in this boot: remote/ssh/jobs.py), or
  - an SSH session is open (an ESTABLISHED TCP connection on local port --ssh-port, read from /proc/net/tcp
    and tcp6: IAP tunnels and direct logins alike, with or without a terminal, which utmp would miss).

Between the phases of a `pulumi up` an SSH session is always open, so "no job and no session for idle
minutes" means nobody is driving the pipeline any more: it ended (succeeded or failed) or its driver went
away. Then it asks the Compute Engine API, as the VM's own service account, to stop or delete this instance:
a token from the metadata server, the instance's name, zone and project from it too, then
POST …/instances/NAME/stop or DELETE …/instances/NAME. It never logs the token. After a request the API
accepted it exits; the next boot starts it again.

Test hooks (a real VM sets neither): GCE_METADATA_HOST (host:port of the metadata server, the name
google-auth uses) and TPU_SFT_COMPUTE_API (the Compute Engine API's base URL).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

ACTIONS = ("stop", "delete", "off")
ACTION_KEY = "tpu-sft-autostop"  # instance metadata attributes written by infra/vm.py
IDLE_KEY = "tpu-sft-idle-minutes"
DEFAULT_METADATA_HOST = "metadata.google.internal"
DEFAULT_COMPUTE_API = "https://compute.googleapis.com"
ESTABLISHED = "01"  # the st column of /proc/net/tcp
PROC_NET_TCP = ("/proc/net/tcp", "/proc/net/tcp6")
STARTING_S = 60  # how long a job without a recorded pid counts as starting


def ssh_sessions(port: int, tables: tuple[str, ...] = PROC_NET_TCP) -> int:
    """Established connections whose local end is `port`: inbound SSH sessions (an outbound one from the VM
    has the remote end on 22, not the local one)."""
    count = 0
    for table in tables:
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == ESTABLISHED and int(fields[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def _alive(pid_line: str) -> bool:
    """The wrapper recorded "PID STARTTIME"; a zombie or a reused pid (other start time) is not the job."""
    try:
        pid, start = pid_line.split()
        with open(f"/proc/{int(pid)}/stat", encoding="utf-8") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return False
    return after_name[0] != "Z" and after_name[19] == start  # fields 3 (state) and 22 (starttime) of stat


def running_jobs(jobs_root: str) -> list[str]:
    """Jobs whose wrapper is alive in this boot (a job of an earlier boot died with it)."""
    boot_id = _read("/proc/sys/kernel/random/boot_id")
    try:
        names = sorted(os.listdir(jobs_root))
    except OSError:
        return []
    running = []
    for name in names:
        job = os.path.join(jobs_root, name)
        if os.path.exists(os.path.join(job, "exit")) or _read(os.path.join(job, "boot_id")) != boot_id:
            continue
        pid_line = _read(os.path.join(job, "pid"))
        # A job appears a moment before its wrapper records its pid: count it as starting, for a while only (one
        # whose wrapper never started must not hold the VM up).
        if _alive(pid_line) if pid_line is not None else time.time() - os.path.getmtime(job) < STARTING_S:
            running.append(name)
    return running


def last_job(jobs_root: str) -> str:
    """The most recently finished job and how it ended, for the log: what the pipeline did last."""
    finished = []
    try:
        names = os.listdir(jobs_root)
    except OSError:
        names = []
    for name in names:
        exit_path = os.path.join(jobs_root, name, "exit")
        try:
            finished.append((os.path.getmtime(exit_path), name, _read(exit_path)))
        except OSError:
            continue
    if not finished:
        return "no tpu-sft job has finished on this VM"
    _, name, code = max(finished)
    return f"last job {name} {'succeeded' if code == '0' else f'failed (exit {code})'}"


class ApiError(RuntimeError):
    """The metadata server or the Compute Engine API refused or failed; the message is one line."""


@dataclass(frozen=True)
class Cloud:
    """The metadata server and the Compute Engine API, as this VM reaches them."""

    metadata_host: str = DEFAULT_METADATA_HOST
    compute_api: str = DEFAULT_COMPUTE_API
    timeout_s: float = 10.0

    @classmethod
    def from_env(cls, environ: dict[str, str], timeout_s: float = 10.0) -> "Cloud":
        return cls(
            environ.get("GCE_METADATA_HOST", DEFAULT_METADATA_HOST),
            environ.get("TPU_SFT_COMPUTE_API", DEFAULT_COMPUTE_API).rstrip("/"),
            timeout_s,
        )

    def metadata(self, path: str) -> str | None:
        """One metadata value (None when the key is absent)."""
        request = urllib.request.Request(
            f"http://{self.metadata_host}/computeMetadata/v1/{path}", headers={"Metadata-Flavor": "Google"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read().decode()
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise ApiError(f"metadata server answered {error.code} for {path}") from None
        except OSError as error:
            raise ApiError(f"metadata server unreachable ({error})") from None

    def terminate(self, action: str) -> str:
        """Ask the API to stop or delete this instance; returns the operation's name."""
        token_json = self.metadata("instance/service-accounts/default/token")
        if token_json is None:
            raise ApiError("the VM has no service account: attach one (tpu-sft:serviceAccount) and run `pulumi up`")
        token = json.loads(token_json)["access_token"]
        name = self.metadata("instance/name")
        zone = (self.metadata("instance/zone") or "").rsplit("/", 1)[-1]  # projects/NUMBER/zones/ZONE
        project = self.metadata("project/project-id")
        instance = f"{self.compute_api}/compute/v1/projects/{project}/zones/{zone}/instances/{name}"
        url, method = (f"{instance}/stop", "POST") if action == "stop" else (instance, "DELETE")
        request = urllib.request.Request(
            url, method=method, data=b"" if method == "POST" else None, headers={"Authorization": f"Bearer {token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read() or b"{}").get("name", "")
        except urllib.error.HTTPError as error:
            hint = (
                " (the VM's service account lacks the tpu-sft autostop role on this instance: run `pulumi up`)"
                if error.code == 403
                else ""
            )
            raise ApiError(f"Compute Engine API answered {error.code} to {method} {url}{hint}") from None
        except OSError as error:
            raise ApiError(f"Compute Engine API unreachable ({error})") from None


@dataclass(frozen=True)
class Policy:
    action: str  # stop | delete | off
    idle_s: float


def read_policy(cloud: Cloud) -> Policy:
    action = (cloud.metadata(f"instance/attributes/{ACTION_KEY}") or "off").strip()
    if action not in ACTIONS:
        raise ApiError(f"metadata {ACTION_KEY}={action!r} is not one of {', '.join(ACTIONS)}")
    raw = cloud.metadata(f"instance/attributes/{IDLE_KEY}") or "30"
    try:
        minutes = float(raw)
    except ValueError:
        raise ApiError(f"metadata {IDLE_KEY}={raw!r} is not a number of minutes") from None
    return Policy(action, minutes * 60)


class Watcher:
    """Tracks when the VM was last busy; `poll` returns the action to take now, or None."""

    def __init__(self, jobs_root: str, ssh_port: int, clock: Callable[[], float] = time.monotonic):
        self.jobs_root, self.ssh_port, self.clock = jobs_root, ssh_port, clock
        self.last_busy = clock()  # started at boot: the boot itself counts as use

    def busy(self) -> str | None:
        jobs = running_jobs(self.jobs_root)
        if jobs:
            return f"job {jobs[0]} is running"
        sessions = ssh_sessions(self.ssh_port)
        if sessions:
            return f"{sessions} SSH session(s) open"
        return None

    def poll(self, policy: Policy) -> tuple[str | None, str]:
        """The action to take now (None: none yet) and what the VM is doing, in words."""
        doing = self.busy()
        if doing is not None:
            self.last_busy = self.clock()
            return None, doing
        if policy.action == "off" or self.clock() - self.last_busy < policy.idle_s:
            return None, "idle"
        return policy.action, "idle"


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} autostop: {message}", flush=True)


def watch(watcher: Watcher, cloud: Cloud, poll_s: float) -> int:
    log(f"watching {watcher.jobs_root} and SSH on port {watcher.ssh_port}")
    doing = ""
    while True:
        try:
            policy = read_policy(cloud)
            action, now = watcher.poll(policy)
            line = f"{now}; on idle: {policy.action} after {policy.idle_s / 60:g} min"
            if line != doing:  # one line per change of activity or settings, not per poll
                doing = line
                log(line)
            if action is not None:
                idle = f"idle {policy.idle_s / 60:g} min, {last_job(watcher.jobs_root)}"
                log(f"{idle}: asking the API to {action} this VM")
                operation = cloud.terminate(action)
                log(f"{action} requested (operation {operation})")
                return 0
        except ApiError as error:
            log(f"{error}; trying again in {poll_s:g} s")
        time.sleep(poll_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="autostop", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs-root", required=True, help="the SSH user's tpu-sft jobs directory")
    parser.add_argument("--ssh-port", type=int, default=22, help="the port sshd listens on (default 22)")
    parser.add_argument("--poll-seconds", type=float, default=30.0, help="seconds between checks (default 30)")
    args = parser.parse_args(argv)
    return watch(Watcher(args.jobs_root, args.ssh_port), Cloud.from_env(dict(os.environ)), args.poll_seconds)


if __name__ == "__main__":
    sys.exit(main())
