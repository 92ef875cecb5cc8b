"""Autostop on the simulated slice hosts (rehearsal/slice_hosts.py): each host runs the watcher its startup script
would start (workload/spend/autostop.py, the one file copied there, this machine's python3), inside the host's own
namespaces, watching the host's own jobs, which are real detached jobs started over SSH as the phases start them.
Worker 0 exports alone, as on a slice: worker 1, idle for longer than idle minutes, waits for it; once worker 0's
job has ended and its own idle minutes have passed, one host resizes the group to 0, with the grant the program
declared (one permission, on the project: infra/resources/autostop.py).

Stand-ins, where nothing real exists here: the metadata server and the Compute Engine API
(tests/workload/gce_standin.py, one per host: each host's own name), Cloud Storage (gcp-storage-emulator behind the
IAM stand-in, as the hosts' service account), and two hosts of the v6e-16's four (the metadata names those two).
SSH sessions are not what holds the hosts up here: the simulated hosts share this machine's network namespace and
port 22 (with the slice rehearsal's hosts, when it runs beside), so each watcher watches a port nobody uses; the
session rule is tested on its own sshd in tests/workload/spend/test_autostop.py."""

from __future__ import annotations

import os
import shutil
import time

from rehearsal import storage_iam
from rehearsal.slice_hosts import SliceHosts
from remote.ssh import jobs
from remote.ssh.connection import connect, run
from remote.ssh.target import Target
from tests.ssh_testbed import REMOTE_USER, wait_until
from tests.workload.gce_standin import TOKEN, GceStandin
from workload.core.contract import JOBS_DIR, STATE_DIR
from workload.spend import autostop

IDLE_S = 3.0
NAMES = ("tpu-sft-dev-01", "tpu-sft-dev-02")
UNUSED_PORT = 1
EXPORT_JOB = "export-0123456789abcdef-1"


def test_the_slice_stops_only_once_every_host_is_idle(testbed, user_key, remote_user, slice_autostop):
    iam = storage_iam.start(slice_autostop.storage, testbed / "autostop-emulator.log")
    attributes = {
        **slice_autostop.metadata,
        autostop.HOSTS_KEY: ",".join(NAMES),
        autostop.IDLE_KEY: str(IDLE_S / 60),
    }
    standins = [
        GceStandin(instance=name, attributes=attributes, group_access=slice_autostop.access).start() for name in NAMES
    ]
    try:
        with SliceHosts(testbed / "autostop", 2, REMOTE_USER, user_key) as hosts:

            def target(worker: int) -> Target:
                return Target(
                    host=hosts.addresses[worker],
                    user=REMOTE_USER,
                    key_path=str(user_key.private),
                    known_hosts=str(hosts.known_hosts),
                )

            with connect(target(0)) as conn:
                jobs.start(conn, EXPORT_JOB, "sleep 600")
            for worker, (host, standin) in enumerate(zip(hosts.hosts, standins, strict=True)):
                shutil.copy(autostop.__file__, host.home / "autostop.py")
                os.chown(host.home / "autostop.py", remote_user.pw_uid, remote_user.pw_gid)
                env = (
                    f"GCE_METADATA_HOST={standin.host} TPU_SFT_COMPUTE_API=http://{standin.host} "
                    f"TPU_SFT_STORAGE_API={iam.url(slice_autostop.storage.host)}"
                )
                with connect(target(worker)) as conn:
                    run(
                        conn,
                        f"{env} setsid nohup /usr/bin/python3 autostop.py --jobs-root ~/{STATE_DIR}/{JOBS_DIR} "
                        f"--ssh-port {UNUSED_PORT} --poll-seconds 0.2 </dev/null >autostop.log 2>&1 &",
                    )
            logs = [host.home / "autostop.log" for host in hosts.hosts]
            waiting = f"idle here; the slice waits for tpu-sft-dev-01 (job {EXPORT_JOB} is running)"
            wait_until(
                lambda: logs[1].exists() and waiting in logs[1].read_text(), 300, "worker 1 to wait for the export"
            )
            time.sleep(2 * IDLE_S)  # worker 1 idle for twice idle minutes: still waiting
            assert [s.resizes for s in standins] == [[], []]

            busy_at = standins[0].mark()  # worker 0 saw its export running after this
            with connect(target(0)) as conn:
                jobs.cancel(conn, EXPORT_JOB)
            done = "resize requested (operation operation-5678-stand-in)"
            wait_until(lambda: any(done in log.read_text() for log in logs), 300, "a host to resize the group")
            resized = min(s.api_times[-1] for s in standins if s.resizes)
            assert resized >= busy_at + IDLE_S  # worker 0's own idle minutes, counted from its job's end
            assert {r for s in standins for r in s.resizes} == {("tpu-sft-dev", 0)}
            text = "".join(log.read_text() for log in logs)
            assert "asking the API to resize group tpu-sft-dev to 0 hosts" in text and TOKEN not in text
            assert iam.refusals == []
    finally:
        for standin in standins:
            standin.stop()
        iam.stop()
