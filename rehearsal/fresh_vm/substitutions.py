"""What the fresh-VM rehearsal changes from a real first `pulumi up`, each by name and printed when used.

The bootstrap spec is the real one (remote.pipeline.bootstrap.seed.spec_for), transformed step by step where a
step needs what this machine cannot reach (GitHub, PyTorch's own index); every other step runs exactly as declared.
`PLATFORM` lists what differs in the VM itself rather than in the spec.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rehearsal.fresh_vm.machine import BOOT_ENV
from remote.pipeline.bootstrap.seed import UV
from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from workload.core import lock

# uv from PyPI instead of astral's installer (which downloads from GitHub): the project's own pin
# (requirements.txt), its manylinux wheel checked against this sha256.
UV_VERSION = "0.13.9"
UV_WHEEL = (
    "https://files.pythonhosted.org/packages/3d/aa/26d64642d808de4a652579ef950d7cd2d37f080a8babf9c67c6b75fc4c3f/"
    f"uv-{UV_VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
)
UV_WHEEL_SHA256 = "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19"
HOST_PYTHON = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions" / "3.12.1"
VM_PYTHON = "/opt/host-python-3.12.1"
HOST_UV_CACHE = Path(os.environ.get("UV_CACHE_DIR", Path.home() / ".cache" / "uv"))
VM_UV_CACHE = "/var/cache/tpu-sft-uv"
LOCAL_CAS = Path("/usr/local/share/ca-certificates")  # this machine's own CAs (its egress re-signs TLS)
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


class SubstitutionError(RuntimeError):
    """The real spec no longer has the shape a substitution replaces: the substitution must be updated."""


@dataclass(frozen=True)
class Substitution:
    name: str
    real: str  # what a real VM does
    here: str  # what the rehearsal does instead

    def line(self) -> str:
        return f"substitution {self.name}: {self.real} → {self.here}"


PLATFORM = (
    Substitution(
        "image",
        "Google's TPU image (Ubuntu 22.04, ubuntu-accel-2204)",
        "Debian bookworm minbase + openssh-server, sudo, curl, ca-certificates, python3, procps, e2fsprogs",
    ),
    Substitution(
        "network",
        "the VM's own address, reached through IAP or its external IP",
        "127.0.0.N on this machine's loopback, port 22, no tunnel",
    ),
    Substitution("dns", "the metadata server's resolver", "this machine's /etc/resolv.conf, copied in at boot"),
    Substitution(
        "data-disk-size",
        "the declared size (tpu-sft:dataDiskSizeGb)",
        "a sparse loop file of at most 8 GB (mkfs writes every inode table)",
    ),
    Substitution(
        "known-hosts",
        "one file per instance id under .tpu-sft/known_hosts",
        "one file in the run directory, new for each VM (the mock engine gives every VM the same id)",
    ),
)


def transform(spec: BootstrapSpec) -> tuple[BootstrapSpec, list[Substitution]]:
    """The real `spec` with each step this machine cannot run replaced, and the substitutions made."""
    made: list[Substitution] = []
    steps: list[Step] = []
    left_out: dict[str, tuple[str, ...]] = {}  # a step left out → what it needed, which its dependents now need
    for step in spec.steps:
        needs = tuple(dict.fromkeys(n for need in spec.needs(step) for n in left_out.get(need, (need,))))
        step = dataclasses.replace(step, after=needs)
        replaced = _REPLACE.get(step.name)
        if replaced is None:
            steps.append(step)
            continue
        new_step, substitution = replaced(step)
        made.append(substitution)
        if new_step is not None:
            steps.append(new_step)
        else:
            left_out[step.name] = needs
    # Symlinks: the kernel (fs.protected_hardlinks) forbids the VM's user to hard-link the cache's root-owned files.
    env = {**spec.env, "UV_CACHE_DIR": VM_UV_CACHE, "UV_LINK_MODE": "symlink", "SSL_CERT_FILE": CA_BUNDLE}
    made.append(
        Substitution(
            "uv-cache",
            "an empty uv cache: every package downloaded from PyPI, copied into the venv",
            f"UV_CACHE_DIR={VM_UV_CACHE}, this machine's {HOST_UV_CACHE} on the boot disk; UV_LINK_MODE=symlink",
        )
    )
    made.append(
        Substitution(
            "tls-trust",
            "the public CAs (uv's own, the image's)",
            f"also this machine's CAs from {LOCAL_CAS} (its network re-signs TLS), in the VM's "
            f"{CA_BUNDLE}, which uv reads through SSL_CERT_FILE",
        )
    )
    return BootstrapSpec(tuple(steps), env), made


def _uv(step: Step) -> tuple[Step, Substitution]:
    wheel = f"/tmp/uv-{UV_VERSION}.whl"
    extract = (
        "import sys, zipfile; open(sys.argv[2], 'wb').write("
        f"zipfile.ZipFile(sys.argv[1]).read('uv-{UV_VERSION}.data/scripts/uv'))"
    )
    command = (
        f'mkdir -p "$HOME/.local/bin" && curl -fsSL --retry 3 -o {wheel} {UV_WHEEL} && '
        f"printf '%s  %s\\n' {UV_WHEEL_SHA256} {wheel} | sha256sum -c --quiet - && "
        f'python3 -c {shlex.quote(extract)} {wheel} "$HOME/.local/bin/uv" && chmod 755 {UV} && {UV} --version'
    )
    return dataclasses.replace(step, command=command), Substitution(
        "uv-from-pypi",
        f"step uv: {step.command}",
        f"uv {UV_VERSION}'s wheel from PyPI (sha256 checked) into ~/.local/bin",
    )


def _python(step: Step) -> tuple[Step, Substitution]:
    # Linked into /usr/local as `make install` would put it, so that a venv (home = /usr/local/bin) finds its
    # standard library; ldconfig, because the build's RUNPATH names this machine's pyenv folder.
    links = " && ".join(
        f"ln -sfn {VM_PYTHON}/{path} /usr/local/{path}"
        for path in ("bin/python3.12", "lib/python3.12", "include/python3.12")
    )
    command = (
        f"sudo sh -c 'echo {VM_PYTHON}/lib > /etc/ld.so.conf.d/host-python.conf && ldconfig && "
        f"mkdir -p /usr/local/include && {links}' && python3.12 --version"
    )
    return dataclasses.replace(step, command=command), Substitution(
        "python-from-host",
        f"step python: {step.command} (downloads from GitHub)",
        f"this machine's pyenv Python 3.12.1, on the boot disk at {VM_PYTHON}, linked into /usr/local",
    )


def _maxtext(step: Step) -> tuple[Step, Substitution]:
    before, backend, rest = f" {step.command}".partition(" UV_TORCH_BACKEND=")
    if not backend:
        raise SubstitutionError(
            "the real maxtext step no longer runs uv with UV_TORCH_BACKEND=…: "
            "update _maxtext in rehearsal/fresh_vm/substitutions.py to the new spec"
        )
    first, _, install = rest.partition(" ")
    words = shlex.split(install)
    python = words[words.index("--python") + 1]
    # MaxText 0.2.3 pins torch==2.11.0+cpu, which only PyTorch's index has: PyPI's build of the same versions,
    # as the lock has them (workload/maxtext-requirements.txt), overrides it.
    torch = shlex.quote(os.path.join(os.path.dirname(os.path.dirname(python)), "torch-from-pypi.txt"))
    pins = shlex.join(lock.pinned(("torch", "torchvision")))
    # MaxText picks its default config (post_train/sft.yml) by comparing realpath(argv[0]) with its package
    # folder: through symlinks into the cache that fails and it falls back to base.yml. Its own files are copied.
    find = "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('maxtext').origin))"
    copy_in = (
        f'pkg=$({shlex.quote(python)} -c {shlex.quote(find)}) && cp -rL "$pkg" "$pkg.copy" && '
        'rm -rf "$pkg" && mv "$pkg.copy" "$pkg"'
    )
    command = f"{before} printf '%s\\n' {pins} > {torch} && {install} --override {torch} && {copy_in}".lstrip()
    return dataclasses.replace(step, command=command), Substitution(
        "torch-from-pypi",
        f"step maxtext: UV_TORCH_BACKEND={first} (PyTorch's own index)",
        "no UV_TORCH_BACKEND: torch and torchvision from PyPI, at the lock's versions (an override of MaxText's "
        "+cpu pins); MaxText's own package then copied out of the cache's symlinks",
    )


def _post_train_extras(step: Step) -> tuple[None, Substitution]:
    return None, Substitution(
        "no-post-train-extras", f"step post-train-extras: {step.command} (GitHub)", "left out (SFT does not need it)"
    )


def _eval_venv(step: Step) -> tuple[None, Substitution]:
    return None, Substitution(
        "no-eval-venv",
        f"step eval-venv: {step.command[:120]}… (vLLM TPU, lm-eval, punkt_tab from GitHub)",
        "left out: this rehearsal sets tpu-sft:evalTasks off; the local rehearsal runs the eval (docs/eval.md)",
    )


_REPLACE = {
    "uv": _uv,
    "python": _python,
    "maxtext": _maxtext,
    "post-train-extras": _post_train_extras,
    "eval-venv": _eval_venv,
}


def provision_boot_disk(rootfs: Path) -> None:
    """What the substituted steps find on the boot disk: the host's Python 3.12.1, its uv cache, its CAs."""
    for ca in sorted(LOCAL_CAS.glob("*.crt")):
        # Both places: the bundle for now, the folder so that an upgrade of ca-certificates keeps them.
        shutil.copy(ca, f"{rootfs}{LOCAL_CAS}/{ca.name}")
        with open(f"{rootfs}{CA_BUNDLE}", "a") as bundle:
            bundle.write(ca.read_text())
    # Hard links, like the wheels below: nothing on the VM writes there (root-owned), and deleting a boot disk
    # then frees no blocks (this machine's disk discards synchronously: freeing 300 MB takes minutes under load).
    _run(["cp", "-al", str(HOST_PYTHON), f"{rootfs}{VM_PYTHON}"])
    # The unpacked wheels (10 GB) as hard links, made here as root: seconds, and never written to (uv only adds
    # new entries). The rest (80 MB of indexes, locks and markers, which uv rewrites) as writable copies, so
    # this machine's own cache is never changed by the VM.
    cache = f"{rootfs}{VM_UV_CACHE}"
    _run(["mkdir", "-p", cache])
    for entry in sorted(HOST_UV_CACHE.iterdir()):
        _run(["cp", "-al" if entry.name == "archive-v0" else "-a", str(entry), cache])
    # Not through symlinks: chmod would change their targets, and fails on one whose target a concurrent uv on
    # this machine has not written yet.
    _run(
        [
            "find",
            cache,
            "-path",
            f"{cache}/archive-v0/*",
            "-prune",
            "-o",
            "!",
            "-type",
            "l",
            "-exec",
            "chmod",
            "a+rwX",
            "{}",
            "+",
        ]
    )


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SubstitutionError(
            f"{' '.join(argv[:3])} … failed: {done.stderr.strip()[-300:]}. Fix: the run directory "
            f"must be on the same filesystem as {HOST_UV_CACHE} (hard links)"
        )


@dataclass(frozen=True)
class StorageEndpoint:
    """Cloud Storage for the VM's clients: on a real VM, Google's API with the VM's service account; here the
    storage emulator behind the IAM stand-in (rehearsal/storage_iam.py), at the endpoint that stands for the VM's
    account, on this machine's loopback (the VM shares it), set for every SSH session by sshd."""

    env: dict[str, str]
    identity: str  # the member the endpoint stands for: "serviceAccount:…"

    @property
    def substitution(self) -> Substitution:
        return Substitution(
            "cloud-storage",
            "the checkpoint bucket on storage.googleapis.com, as the VM's service "
            "account (a token from the metadata server)",
            f"gcp-storage-emulator behind the IAM stand-in at {self.env['STORAGE_EMULATOR_HOST']}, "
            f"which stands for {self.identity} and allows what its declared roles allow",
        )

    def provision(self, rootfs: Path) -> None:
        settings = " ".join(f"{name}={value}" for name, value in sorted(self.env.items()))
        Path(f"{rootfs}/etc/ssh/sshd_config.d/60-storage-emulator.conf").write_text(f"SetEnv {settings}\n")
        # And for what the startup script starts (a run resumed at boot): on a real VM any process reaches the
        # bucket through the metadata server; here guest.py hands the startup script these (machine.py BOOT_ENV).
        Path(f"{rootfs}{BOOT_ENV}").write_text("".join(f"{n}={v}\n" for n, v in sorted(self.env.items())))
