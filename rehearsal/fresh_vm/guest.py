"""The simulated VM's first-boot timeline, run inside it as its PID 1 by the image's own python3.

Plays what systemd, sshd's key generation and Google's guest agent do on a new Compute Engine VM, in the
order and with the delays that make a new VM hard to reach:
  boot → host keys made (only where the disk has none) → startup-script starts (as root, every boot)
       → sshd answers `sshd_delay_s` after boot → the login users of the `ssh-keys` metadata, with their
         authorized keys and passwordless sudo, exist `user_delay_s` after that.
Every event goes to the console (stdout) as "<unix time> <event> <detail>", the way GCE's serial port shows
a boot. Standard library only: the image's python3 runs it. Reads /run/tpu-sft-sim/boot.json.
"""

import glob
import json
import os
import subprocess
import sys
import threading
import time

SIM = "/run/tpu-sft-sim"
SUDOERS_GROUP = "google-sudoers"  # the guest agent's group, with passwordless sudo
OWNED: set = set()  # children whose exit status a thread here waits for: reap_forever leaves them alone
OWNED_LOCK = threading.Lock()


def event(name, detail=""):
    sys.stdout.write(f"{time.time():.3f} {name} {detail}\n")
    sys.stdout.flush()


def pump(prefix, stream):
    for line in stream:
        event(prefix, line.rstrip("\n"))


def spawn(argv, **options):
    """Popen, registered as owned before the reaper can see it exit."""
    with OWNED_LOCK:
        proc = subprocess.Popen(argv, **options)
        OWNED.add(proc.pid)
    return proc


def run(argv, check=True):
    """subprocess.run for PID 1: its child is not mistaken for an orphan. Returns (exit code, stdout)."""
    proc = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.communicate()[0]
    OWNED.discard(proc.pid)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}")
    return proc.returncode, out


def host_keys():
    if glob.glob("/etc/ssh/ssh_host_*_key"):
        event("host-keys-kept")
        return
    run(["ssh-keygen", "-A"])
    fingerprint = run(["ssh-keygen", "-l", "-f", "/etc/ssh/ssh_host_ed25519_key.pub"])[1].split()[1]
    event("host-keys-generated", fingerprint)


# What systemd gives a service (google-startup-scripts.service runs the script on a real VM): its default PATH, and
# nothing of the environment this machine started the VM with, which a job the script starts must not rely on.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def boot_env(path):
    """The environment the startup script gets: a service's, plus the rehearsal's stand-in for what the metadata
    server gives every process of a real VM (machine.py BOOT_ENV, written by substitutions.py)."""
    env = {"PATH": SYSTEMD_PATH}
    try:
        with open(path) as f:
            env.update(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        pass
    return env


def startup_script(env_path):
    event("startup-script-start")
    proc = spawn(
        [f"{SIM}/startup-script"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=boot_env(env_path)
    )
    pump("startup-script-output", proc.stdout)
    event("startup-script-exit", str(proc.wait()))
    OWNED.discard(proc.pid)


def sshd(address):
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    with open("/etc/ssh/sshd_config.d/50-vm-network.conf", "w") as f:
        f.write(f"ListenAddress {address}\n")  # this VM's own address, port 22
    event("sshd-start")
    proc = spawn(["/usr/sbin/sshd", "-D", "-e"], stderr=subprocess.PIPE, text=True)
    threading.Thread(target=pump, args=("sshd", proc.stderr), daemon=True).start()


def guest_agent_users(ssh_keys):
    """As the guest agent does from the `ssh-keys` metadata: create each user, give it sudo, authorize its key."""
    run(["groupadd", "-f", SUDOERS_GROUP])
    with open(f"/etc/sudoers.d/{SUDOERS_GROUP}", "w") as f:
        f.write(f"%{SUDOERS_GROUP} ALL=(ALL:ALL) NOPASSWD:ALL\n")
    os.chmod(f"/etc/sudoers.d/{SUDOERS_GROUP}", 0o440)
    for line in filter(None, (raw.strip() for raw in ssh_keys.splitlines())):
        user, key = line.split(":", 1)
        if run(["id", "-u", user], check=False)[0] != 0:
            run(["useradd", "-m", "-s", "/bin/bash", "-p", "*", "-G", SUDOERS_GROUP, user])
        home = os.path.expanduser(f"~{user}")
        os.makedirs(f"{home}/.ssh", mode=0o700, exist_ok=True)
        with open(f"{home}/.ssh/authorized_keys", "w") as f:
            f.write(f"{key} # Added by Google\n")
        os.chmod(f"{home}/.ssh/authorized_keys", 0o600)
        run(["chown", "-R", f"{user}:{user}", f"{home}/.ssh"])
        event("user-created", user)


def reap_forever():
    """PID 1's other job: reap every orphan it adopts (the remote layer's detached jobs become its children)."""
    while True:
        try:
            exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            exited = None
        with OWNED_LOCK:
            orphan = exited is not None and exited.si_pid not in OWNED
            if orphan:
                os.waitpid(exited.si_pid, 0)
        if not orphan:
            time.sleep(0.2)


def main():
    with open(f"{SIM}/boot.json") as f:
        boot = json.load(f)
    started = time.monotonic()
    event("boot", f"{boot['hostname']} boot {boot['boot']}")
    with open("/etc/hosts", "a") as f:
        f.write(f"{boot['address']} {boot['hostname']}\n")
    threading.Thread(target=reap_forever, daemon=True).start()
    host_keys()
    threading.Thread(target=startup_script, args=(boot["boot_env"],), daemon=True).start()
    time.sleep(max(0.0, boot["sshd_delay_s"] - (time.monotonic() - started)))
    sshd(boot["address"])
    time.sleep(boot["user_delay_s"])
    guest_agent_users(boot["ssh_keys"])
    threading.Event().wait()  # PID 1 never exits: the VM runs until it is deleted


main()
