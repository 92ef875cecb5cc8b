"""The same command on all hosts in parallel: one host failing is named, the others' results stay."""

import dataclasses
import time

from remote.ssh.group import run_all


def test_every_host_answers(cluster, scratch):
    results = run_all(cluster.target(scratch), 'echo "$SSH_CONNECTION" | cut -d" " -f3')
    assert list(results) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert all(r.ok and r.stdout == f"{host}\n" for host, r in results.items())


def test_one_worker_failing_is_named_and_the_others_still_report(cluster, scratch):
    command = 'case "$SSH_CONNECTION" in *" 127.0.0.3 "*) echo broken >&2; exit 5;; esac; echo fine'
    results = run_all(cluster.target(scratch), command)
    assert [(h, r.exit_code) for h, r in results.items()] == [("127.0.0.2", 0), ("127.0.0.3", 5), ("127.0.0.4", 0)]
    assert results["127.0.0.3"].stderr == "broken\n"
    assert results["127.0.0.2"].stdout == results["127.0.0.4"].stdout == "fine\n"


def test_one_worker_unreachable_within_the_timeout(cluster, scratch, make_proxy):
    # A silent worker on 127.0.0.5, same port as the others: it accepts TCP and never answers.
    port = cluster.hosts[0].sshd.port
    make_proxy(("127.0.0.1", 9), address="127.0.0.5", port=port).blackhole()
    target = dataclasses.replace(cluster.target(scratch, connect_timeout=1.0), workers=("127.0.0.3", "127.0.0.5"))
    start = time.monotonic()
    results = run_all(target, "echo fine")
    assert time.monotonic() - start < 10  # its 1 s connect timeout, not paramiko's 15 s banner wait or an hour
    assert results["127.0.0.2"].ok and results["127.0.0.3"].ok
    dead = results["127.0.0.5"]
    assert dead.exit_code is None and dead.error.startswith("127.0.0.5: ") and not dead.ok
