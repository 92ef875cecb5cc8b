"""Google's restart of the simulated slice hosts (rehearsal/slice_hosts.py `restart`) and each host's start-up resume
step (rehearsal/slice_restart.py), with no MaxText: every host's processes die together, each comes back with its
home, an empty /dev/shm and a new boot id, and the resume step of the startup script the program declared for the
slice begins the next attempt of a run that died with its boot. A host that does not come back runs nothing until it
does. What the attempts then do together is the slice rehearsal's (tests/slice/test_slice_rehearsal.py)."""

from __future__ import annotations

from pathlib import Path

from rehearsal.slice_hosts import SliceHosts
from rehearsal.slice_restart import resume_step, run_resume_step
from remote.ssh import jobs
from remote.ssh.connection import connect, run
from remote.ssh.target import Target
from tests.ssh_testbed import REMOTE_USER, wait_until
from workload.run.boot_resume import WAIT_FLAG

RUNS = ".tpu-sft/runs"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
# The attempt's command: alive until a boot kills it; resumed (its arguments the start-up's flags), it prints them.
ATTEMPT = 'if [ "$#" -gt 0 ]; then echo "$@"; else exec sleep 600; fi\n'


def test_a_restart_kills_every_host_and_each_start_up_resumes_the_run(testbed, user_key, remote_user, slice_stack):
    script = slice_stack(overrides={"tpu-sft:sshUser": REMOTE_USER}).one(TEMPLATE).inputs["metadata"]["startup-script"]
    step = resume_step(script, f"/home/{REMOTE_USER}", remote_user.pw_dir, wait_s=7)
    with SliceHosts(testbed / "google-restart", 2, REMOTE_USER, user_key) as hosts:

        def target(host) -> Target:
            return Target(
                host=host.address, user=REMOTE_USER, key_path=str(user_key.private), known_hosts=str(hosts.known_hosts)
            )

        for host in hosts.hosts:
            with connect(target(host)) as conn:
                run(conn, f"printf %s {_quoted(ATTEMPT)} > attempt.sh && touch /dev/shm/scratch")
                # The attempt's records as remote/pipeline/claim.py leaves them, which the start-up copies.
                run(conn, f"mkdir -p {RUNS} && echo {{}} >{RUNS}/run-1.json && echo keep >{RUNS}/run-1.json.until")
                jobs.start(conn, "run-1", "sh ~/attempt.sh")
        first_boots = [host.boot_id for host in hosts.hosts]
        for host in hosts.hosts:
            wait_until(lambda h=host: (_job(h.home, "run-1") / "boot_id").exists(), 30, "run-1 to start")
            assert (_job(host.home, "run-1") / "boot_id").read_text().strip() == host.boot_id  # the host's own

        hosts.restart(down=(1,))
        zero, one = hosts.by_worker_id(0), hosts.by_worker_id(1)
        assert one.sshd.proc is None  # not back: nothing of it runs
        assert zero.boot_id != first_boots[0] and not zero.path("/dev/shm/scratch").exists()
        assert zero.path(f"{remote_user.pw_dir}/attempt.sh").exists()  # the boot disk stays
        assert not (_job(zero.home, "run-1") / "exit").exists()  # its attempt died with the boot
        said = run_resume_step(zero, step)
        assert (
            said
            == "tpu-sft boot-resume: run-1 died with its boot (no exit record, started in another boot): started run-2"
        )
        _ended(zero.home)
        assert (_job(zero.home, "run-2") / "log").read_text().split() == [
            "--boot-resume-of", "run-1", "--boot-resumes", "3", "--resume-deadline-hours", "24", WAIT_FLAG, "7"
        ]  # fmt: skip
        assert (_job(zero.home, "run-2") / "boot_id").read_text().strip() == zero.boot_id
        assert not _job(one.home, "run-2").exists()

        late = hosts.come_back(1)
        assert late.boot_id not in first_boots
        assert run_resume_step(late, step).endswith("started run-2")
        _ended(late.home)
        assert run_resume_step(late, step).startswith("tpu-sft boot-resume: nothing to resume: run-2 ended on its own")


def _job(home: Path, name: str) -> Path:
    return home / ".tpu-sft" / "jobs" / name


def _ended(home: Path) -> None:
    wait_until((_job(home, "run-2") / "exit").exists, 30, "the resumed attempt to end")
    assert (_job(home, "run-2") / "exit").read_text().strip() == "0"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
