"""Remote-layer figures against local OpenSSH servers this script starts itself (needs root and sshd).

  first connection   TCP + key exchange + authentication of a fresh `connect`, no reuse
  bootstrap re-check `bootstrap_all` with the real seed spec on a host that already holds it, 3 hosts
  follow latency     from a line being written on the host to `follow` handing it over

Run: .venv/bin/python -m bench.remote_bench   (prints one small table; not a test)
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import paramiko

from remote.pipeline.bootstrap.scheduler import BootstrapResult, bootstrap_all
from remote.pipeline.bootstrap.seed import spec_for
from remote.ssh import jobs
from remote.ssh.connection import connect
from remote.ssh.target import Target
from tests.ssh_testbed import REMOTE_USER, Sshd, ensure_remote_user, free_port, make_user_key, wait_until
from workload.core.config import PipelineConfig

REPO = Path(__file__).resolve().parents[1]

SAMPLES = 10


def main() -> None:
    user = ensure_remote_user()
    base = Path(tempfile.mkdtemp(prefix="tpu-sft-remote-bench-"))
    base.chmod(0o755)
    servers: list[Sshd] = []
    try:
        key = make_user_key(base / "key")
        (base / "key").chmod(0o755)
        key.authorized_keys.chmod(0o644)
        state = base / "state"
        state.mkdir()
        os.chown(state, user.pw_uid, user.pw_gid)
        port = free_port("127.0.0.2")
        servers = [Sshd(base / f"h{i}", key, f"127.0.0.{i}").start(port) for i in (2, 3, 4)]
        known = base / "known_hosts"
        known.write_text("".join(s.known_hosts_line for s in servers))
        target = Target(
            host="127.0.0.2",
            port=port,
            user=REMOTE_USER,
            key_path=str(key.private),
            known_hosts=str(known),
            state_dir=str(state),
            workers=("127.0.0.3", "127.0.0.4"),
        )
        rows = [first_connection(target), *bootstrap_recheck(target, state), follow_latency(target, state)]
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    width, result_width = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    print(f"{'measure':<{width}}  {'result':<{result_width}}  target")
    for name, result, goal in rows:
        print(f"{name:<{width}}  {result:<{result_width}}  {goal}")


def first_connection(target: Target):
    times = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        connect(target).close()
        times.append(time.perf_counter() - start)
    return ("first connection", f"median {ms(statistics.median(times))}, max {ms(max(times))} (n={SAMPLES})", "—")


def bootstrap_recheck(target: Target, state: Path):
    spec = spec_for(PipelineConfig())
    (state / "bootstrap").mkdir()
    (state / "bootstrap" / "fingerprint").write_text(spec.fingerprint)  # as a finished bootstrap leaves it
    channels: dict[str, int] = {}
    original = paramiko.Transport.open_session

    def counting(self, *args, **kwargs):
        channels[self.getpeername()[0]] = channels.get(self.getpeername()[0], 0) + 1
        return original(self, *args, **kwargs)

    paramiko.Transport.open_session = counting
    try:
        start = time.perf_counter()
        results = bootstrap_all(target, spec)
        elapsed = time.perf_counter() - start
    finally:
        paramiko.Transport.open_session = original
    assert all(isinstance(r, BootstrapResult) and not r.installed for r in results.values()), results
    return [
        ("no-op bootstrap re-check, 3 hosts", f"{ms(elapsed)} incl. connecting", "< 3 s"),
        ("round trips per host", ", ".join(f"{h}: {n}" for h, n in sorted(channels.items())), "≤ 1"),
    ]


def follow_latency(target: Target, state: Path):
    go = state / "go"
    command = (
        f"i=0; while [ $i -lt {SAMPLES} ]; do while [ ! -e {go}.$i ]; do sleep 0.005; done; "
        "echo line $i; i=$((i+1)); done"
    )
    with connect(target) as conn:
        jobs.start(conn, "latency", command)
    arrived: dict[int, float] = {}
    follower = threading.Thread(
        target=jobs.follow,
        args=(target, "latency", lambda line: arrived.setdefault(int(line.split()[1]), time.perf_counter())),
    )
    follower.start()
    latencies = []
    for i in range(SAMPLES):
        time.sleep(0.3)  # let follow settle into its long poll, as it would between training log lines
        written = time.perf_counter()
        Path(f"{go}.{i}").touch()
        wait_until(lambda sample=i: sample in arrived, timeout=5, what=f"line {i}")
        latencies.append(arrived[i] - written)
    follower.join()
    return (
        "follow latency (write → on_line)",
        f"median {ms(statistics.median(latencies))}, max {ms(max(latencies))} (n={SAMPLES})",
        "< 1 s",
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


if __name__ == "__main__":
    main()
