"""The e2e run's command-line sampler finds a secret on a command line (else its "nowhere" proves nothing)."""

from __future__ import annotations

import subprocess
import sys

from tests.e2e.pulumi_up import PsSampler
from tests.ssh_testbed import wait_until


def test_the_sampler_catches_a_secret_on_another_process_command_line():
    secret = "hf_SamplerCanary" + "x" * 20
    sampler = PsSampler(secret)
    sampler.start()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", secret])
    try:
        wait_until(lambda: sampler.holding_secret, 300, "a sample holding the secret")
    finally:
        holder.kill()
        holder.wait()
        sampler.stop()
    assert secret in sampler.holding_secret[0] and "time.sleep(300)" in sampler.holding_secret[0]
    assert sampler.samples >= 1
