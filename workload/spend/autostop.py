"""Autostop: the VM deletes itself once nothing has used it for `idle minutes`; a slice's hosts end together, once
every one of them has been idle that long. It never stops a VM: Compute Engine cannot restart a stopped TPU VM;
what is kept outlives the VM (the data disk, attached without auto-delete, and the checkpoint bucket).

Runs on the VM as root, started at every boot by the startup script the Pulumi program declares
(infra/resources/startup.py), which copies this one file there: it needs only the standard library of the image's
python3 and imports nothing from tpu-sft. It works with the laptop that ran `pulumi up` closed.

Every poll it reads its settings from the instance's metadata (`tpu-sft-autostop`: delete or off;
`tpu-sft-idle-minutes`), so a `pulumi up` that changes them takes effect without a reboot. The VM is busy while

  - a tpu-sft job runs (a job directory under --jobs-root whose wrapper is alive in this boot: remote/ssh/jobs.py), or
  - an SSH session is open (an ESTABLISHED TCP connection on local port --ssh-port, read from /proc/net/tcp
    and tcp6: IAP tunnels and direct logins alike, with or without a terminal, which utmp would miss).

Between the phases of a `pulumi up` an SSH session is always open, so "no job and no session for idle
minutes" means nobody is driving the pipeline any more: it ended (succeeded or failed) or its driver went
away. Then it asks the Compute Engine API, as the VM's own service account, to delete this instance: a token
from the metadata server, the instance's name, zone and project from it too, then DELETE …/instances/NAME. It
never logs the token. After a request the API
accepted it exits; the next boot starts it again.

On a slice's host (metadata `tpu-sft-slice-group`, `-hosts` and `tpu-sft-autostop-reports`, written by
infra/resources/slice.py) no host may decide alone: export and verify run on worker 0 only, and a user may log in to any
one host. Every poll each host writes what it sees to the checkpoint bucket (`<reports>/<host>.json`: busy with what,
or idle since when), and once it has itself been idle for idle minutes it reads every host's report. Only when all
agree does it ask the API to resize the slice's managed instance group to 0 (`instanceGroupManagers.resize`,
size 0: the group deletes its hosts and their bill; the group, its template and the bucket stay, and the next
`pulumi up` sets the size back: docs/slices.md). Whichever host sees the agreement first acts; a second resize to
0 changes nothing. A host that has not reported for `STALE_POLLS` polls counts as quiet since its last report (or
since this watcher started, if it never reported): a host Google ended, or whose watcher died, must not hold the
others up for ever; one that reports again counts again. `delete` means the resize on a slice: the group makes its hosts
anew from the template when it grows again (no standby pool of stopped hosts: docs/slices.md says why).

Test hooks (a real VM sets none): GCE_METADATA_HOST (host:port of the metadata server, the name google-auth
uses), TPU_SFT_COMPUTE_API (the Compute Engine API's base URL) and TPU_SFT_STORAGE_API (Cloud Storage's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable

ACTIONS = ("delete", "off")
ACTION_KEY = "tpu-sft-autostop"  # instance metadata attributes written by infra/resources/vm.py
IDLE_KEY = "tpu-sft-idle-minutes"
GROUP_KEY = "tpu-sft-slice-group"  # a slice's: written by infra/resources/slice.py
HOSTS_KEY = "tpu-sft-slice-hosts"  # its hosts' names, comma-separated
REPORTS_KEY = "tpu-sft-autostop-reports"  # gs://BUCKET/PREFIX
DEFAULT_METADATA_HOST = "metadata.google.internal"
DEFAULT_COMPUTE_API = "https://compute.googleapis.com"
DEFAULT_STORAGE_API = "https://storage.googleapis.com"
# Test hooks, the APIs' base URLs; a real VM sets neither. The names are written here only, since this file imports
# nothing of tpu-sft: remote/pipeline/capacity.py and remote/stack/vm_state.py import them from it.
COMPUTE_API_ENV = "TPU_SFT_COMPUTE_API"
STORAGE_API_ENV = "TPU_SFT_STORAGE_API"
STALE_POLLS = 4  # a host silent this many polls counts as quiet since it last reported
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
    """The metadata server, the Compute Engine API and Cloud Storage, as this VM reaches them."""

    metadata_host: str = DEFAULT_METADATA_HOST
    compute_api: str = DEFAULT_COMPUTE_API
    storage_api: str = DEFAULT_STORAGE_API
    timeout_s: float = 10.0

    @classmethod
    def from_env(cls, environ: dict[str, str], timeout_s: float = 10.0) -> "Cloud":
        return cls(
            environ.get("GCE_METADATA_HOST", DEFAULT_METADATA_HOST),
            environ.get(COMPUTE_API_ENV, DEFAULT_COMPUTE_API).rstrip("/"),
            environ.get(STORAGE_API_ENV, DEFAULT_STORAGE_API).rstrip("/"),
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

    def _token(self) -> str:
        token_json = self.metadata("instance/service-accounts/default/token")
        if token_json is None:
            raise ApiError("the VM has no service account: attach one (tpu-sft:serviceAccount) and run `pulumi up`")
        return json.loads(token_json)["access_token"]

    def _zone_path(self) -> str:
        zone = (self.metadata("instance/zone") or "").rsplit("/", 1)[-1]  # projects/NUMBER/zones/ZONE
        return f"{self.compute_api}/compute/v1/projects/{self.metadata('project/project-id')}/zones/{zone}"

    def _send(
        self,
        method: str,
        url: str,
        grant: str,
        body: bytes | None = None,
        missing_ok: bool = False,
        token: str | None = None,
    ) -> bytes:
        """One authorized call (with `token`, or a new one from the metadata server); a 403 names the `grant` that
        is missing. With `missing_ok`, a 404 is b""."""
        api = "Cloud Storage" if url.startswith(self.storage_api) else "Compute Engine API"
        headers = {"Authorization": f"Bearer {token or self._token()}"}
        if body:
            # Not application/json: the object is read back as bytes, and gcp-storage-emulator, which the tests
            # use for Cloud Storage, would parse a JSON body instead of storing it.
            headers["Content-Type"] = "application/octet-stream"
        request = urllib.request.Request(url, method=method, data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as error:
            if error.code == 404 and missing_ok:
                return b""
            hint = f" (the VM's service account lacks {grant}: run `pulumi up`)" if error.code == 403 else ""
            raise ApiError(f"{api} answered {error.code} to {method} {url}{hint}") from None
        except OSError as error:
            raise ApiError(f"{api} unreachable ({error})") from None

    def delete_instance(self) -> str:
        """Ask the API to delete this instance; returns the operation's name."""
        url = f"{self._zone_path()}/instances/{self.metadata('instance/name')}"
        answer = self._send("DELETE", url, "the tpu-sft autostop role on this instance")
        return json.loads(answer or b"{}").get("name", "")

    def resize_to_zero(self, group: str) -> str:
        """Ask the API to resize this slice's group to 0 hosts; returns the operation's name."""
        url = f"{self._zone_path()}/instanceGroupManagers/{group}/resize?size=0"
        answer = self._send("POST", url, f"the tpu-sft autostop role on group {group}", b"")
        return json.loads(answer or b"{}").get("name", "")

    def write_report(self, reports: str, host: str, report: dict) -> None:
        bucket, name = _object(reports, host)
        url = f"{self.storage_api}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}"
        self._send("POST", url, f"write access to gs://{bucket}", json.dumps(report).encode())

    def read_reports(self, reports: str, hosts: tuple[str, ...]) -> dict[str, dict | None]:
        """Each host's last report (None: it never wrote one, or not one that reads), all read with one token: a
        v6e-256 has 64 hosts."""
        token = self._token()
        found = {}
        for host in hosts:
            bucket, name = _object(reports, host)
            url = f"{self.storage_api}/storage/v1/b/{bucket}/o/{name}?alt=media"
            answer = self._send("GET", url, f"read access to gs://{bucket}", missing_ok=True, token=token)
            found[host] = parse_report(answer)
        return found


def parse_report(raw: bytes) -> dict | None:
    """A report as Watcher.report writes it, or None for anything else (nothing, or not one that reads): a host
    whose report does not read counts as one that never reported."""
    try:
        report = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(report, dict):
        return None
    numbers = (int, float)
    idle_since = report.get("idle_since")
    if not isinstance(report.get("written"), numbers) or not (idle_since is None or isinstance(idle_since, numbers)):
        return None
    return report


def _object(reports: str, host: str) -> tuple[str, str]:
    """gs://BUCKET/PREFIX and a host → the bucket and its report's object name, quoted for a URL."""
    bucket, _, prefix = reports.removeprefix("gs://").partition("/")
    return bucket, urllib.parse.quote(f"{prefix.strip('/')}/{host}.json", safe="")


@dataclass(frozen=True)
class Slice:
    """The slice this host belongs to: its group, every host's name, and where the hosts report."""

    group: str
    hosts: tuple[str, ...]
    reports: str  # gs://BUCKET/PREFIX


@dataclass(frozen=True)
class Policy:
    action: str  # delete | off
    idle_s: float
    slice: Slice | None = None  # None: a single VM


def read_policy(cloud: Cloud) -> Policy:
    action = (cloud.metadata(f"instance/attributes/{ACTION_KEY}") or "off").strip()
    if action not in ACTIONS:
        raise ApiError(f"metadata {ACTION_KEY}={action!r} is not one of {', '.join(ACTIONS)}")
    raw = cloud.metadata(f"instance/attributes/{IDLE_KEY}") or "30"
    try:
        minutes = float(raw)
    except ValueError:
        raise ApiError(f"metadata {IDLE_KEY}={raw!r} is not a number of minutes") from None
    group = cloud.metadata(f"instance/attributes/{GROUP_KEY}")
    if group is None:
        return Policy(action, minutes * 60)
    hosts = tuple(h for h in (cloud.metadata(f"instance/attributes/{HOSTS_KEY}") or "").split(",") if h)
    reports = cloud.metadata(f"instance/attributes/{REPORTS_KEY}") or ""
    if not hosts or not reports.startswith("gs://"):
        raise ApiError(f"metadata {GROUP_KEY} is set, but {HOSTS_KEY}={hosts!r} or {REPORTS_KEY}={reports!r} is not")
    return Policy(action, minutes * 60, Slice(group, hosts, reports))


def quiet_since(report: dict | None, now: float, stale_s: float, watching_since: float) -> float | None:
    """Since when (wall clock) a host has done nothing a watcher can see; None: busy now."""
    if report is None:
        return watching_since  # never reported: quiet for as long as this watcher has waited for it
    if report["idle_since"] is not None:
        return float(report["idle_since"])
    written = float(report["written"])
    return written if now - written > stale_s else None  # busy when last heard from, and silent since


def holding_up(
    reports: dict[str, dict | None], now: float, idle_s: float, stale_s: float, watching_since: float
) -> list[str]:
    """The hosts that keep the slice up, each with why; empty: every host has been quiet for `idle_s`."""
    holding = []
    for host, report in reports.items():
        since = quiet_since(report, now, stale_s, watching_since)
        if since is None:
            holding.append(f"{host} ({(report or {}).get('busy') or 'busy'})")
        elif now - since < idle_s:
            holding.append(f"{host} (idle {(now - since) / 60:.1f} min)")
    return holding


class Watcher:
    """Tracks when the VM was last busy; `poll` returns the action to take now, or None."""

    def __init__(
        self,
        jobs_root: str,
        ssh_port: int,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ):
        self.jobs_root, self.ssh_port, self.clock, self.wall = jobs_root, ssh_port, clock, wall
        self.last_busy = clock()  # started at boot: the boot itself counts as use
        self.started = wall()
        self.doing: str | None = None  # what kept the VM busy at the last poll

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
        self.doing = self.busy()
        if self.doing is not None:
            self.last_busy = self.clock()
            return None, self.doing
        if policy.action == "off" or self.clock() - self.last_busy < policy.idle_s:
            return None, "idle"
        return policy.action, "idle"

    def report(self, host: str) -> dict:
        """What this host tells the slice's other hosts (the wall clock: they compare it with theirs)."""
        now = self.wall()
        idle_since = None if self.doing is not None else now - (self.clock() - self.last_busy)
        return {"host": host, "busy": self.doing, "idle_since": idle_since, "written": now}


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} autostop: {message}", flush=True)


def slice_waits_for(watcher: Watcher, cloud: Cloud, slice_: Slice, idle_s: float, poll_s: float) -> list[str]:
    """The hosts that still hold the slice up, read from every host's report (empty: resize it now)."""
    reports = cloud.read_reports(slice_.reports, slice_.hosts)
    return holding_up(reports, watcher.wall(), idle_s, STALE_POLLS * poll_s, watcher.started)


def watch(watcher: Watcher, cloud: Cloud, poll_s: float) -> int:
    log(f"watching {watcher.jobs_root} and SSH on port {watcher.ssh_port}")
    doing = ""
    while True:
        try:
            policy = read_policy(cloud)
            action, now = watcher.poll(policy)
            line = f"{now}; on idle: {policy.action} after {policy.idle_s / 60:g} min"
            waiting_for: list[str] = []
            if policy.slice is not None and policy.action != "off":
                host = cloud.metadata("instance/name") or ""
                cloud.write_report(policy.slice.reports, host, watcher.report(host))
                if action is not None:  # idle here for long enough: do the others agree?
                    waiting_for = slice_waits_for(watcher, cloud, policy.slice, policy.idle_s, poll_s)
                if waiting_for:
                    line = f"idle here; the slice waits for {', '.join(waiting_for)}"
            if line != doing:  # one line per change of activity, settings or hosts waited for, not per poll
                doing = line
                log(line)
            if action is not None and policy.slice is not None and not waiting_for:
                idle = f"every host idle {policy.idle_s / 60:g} min (on this host: {last_job(watcher.jobs_root)})"
                log(f"{idle}: asking the API to resize group {policy.slice.group} to 0 hosts")
                log(f"resize requested (operation {cloud.resize_to_zero(policy.slice.group)})")
                return 0
            if action is not None and policy.slice is None:
                idle = f"idle {policy.idle_s / 60:g} min, {last_job(watcher.jobs_root)}"
                log(f"{idle}: asking the API to delete this VM")
                log(f"delete requested (operation {cloud.delete_instance()})")
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
