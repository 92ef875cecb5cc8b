"""Stand-ins for the tools the README's cloud section runs, each refusing what the real tool refuses when a command
comes before what it needs: `pulumi` (a backend, a passphrase, a stack, the project's venv, Google credentials, then
the real program under the mock engine), `gcloud` (a login before anything else) and `scripts/venv`.

`pulumi`, as the CLI behaves off a terminal, in its own words where they are quoted:
- before `pulumi login`, every stack command: "PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI
  sessions" (pulumi/pulumi pkg/backend/httpstate: the Cloud backend, the default, wants a token it cannot prompt for);
- with a self-managed backend (`login --local` or `gs://…`) the secrets provider is a passphrase, needed by
  `stack init`, `config set --secret`, `preview` and `up`: "passphrase must be set with PULUMI_CONFIG_PASSPHRASE or
  PULUMI_CONFIG_PASSPHRASE_FILE environment variables" (tests/remote/pulumi_standin.py quotes its source);
- no stack selected: "no stack selected; please use `pulumi stack select` or `pulumi stack init` to choose one"
  (pkg/cmd/pulumi state.go `requireStack`);
- `config set KEY` with no value reads it from stdin, as the CLI does when stdin is not a terminal; secrets are kept
  in Pulumi.<stack>.yaml as `secure:` values, plain ones as text, as the CLI writes them;
- `preview` and `up` run the Python program in the venv Pulumi.yaml names (`.venv`), and fail without it (the
  language host's complaint, in substance, not its wording); pulumi-gcp then needs Application Default Credentials
  ("google: could not find default credentials", golang.org/x/oauth2/google's text); then the real `__main__.py` runs
  under the mock engine (rehearsal/engine.py) with the stack's config, Compute Engine's reservations from
  $FIRST_DAY_RESERVATIONS and the Hub at $HF_ENDPOINT; its warnings print as `warning: …`, a refusal as `error: …`.
  `up` stands for a terminal where the user answers yes.
`gcloud`: `auth login` and `auth application-default login` are recorded; `services enable` and
`projects add-iam-policy-binding` need the first ("You do not currently have an active account selected"); any other
command fails, so the README names only what is modelled here.
Not modelled: real encryption (a secret is base64), Pulumi Cloud, stack renames, `config` without a namespace,
gcloud's projects and permissions.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
from pathlib import Path

import yaml

from tests.remote import pulumi_standin

STATE = "FIRST_DAY_STATE"  # the folder where the stand-ins keep what was run
RESERVATIONS = "FIRST_DAY_RESERVATIONS"  # JSON: "project/zone/name" → CALENDAR or DEFAULT
NOT_LOGGED_IN = "PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions"
NO_PASSPHRASE = pulumi_standin.MISSING
NO_STACK = "no stack selected; please use `pulumi stack select` or `pulumi stack init` to choose one"
NO_VENV = "the virtualenv Pulumi.yaml names, .venv, does not exist: the Python program cannot run (scripts/venv)"
NO_ADC = "google: could not find default credentials"
NO_ACCOUNT = "ERROR: (gcloud) You do not currently have an active account selected."


def install(bin_dir: Path, project_dir: Path) -> None:
    """`pulumi` and `gcloud` in `bin_dir`, and `scripts/venv` in `project_dir` (which holds Pulumi.yaml)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[2]
    for tool in ("pulumi", "gcloud"):
        shim = bin_dir / tool
        shim.write_text(
            f"#!/bin/sh\nPYTHONPATH={json.dumps(str(root))} exec {json.dumps(sys.executable)} -m "
            f'tests.docs.first_day_tools {tool} "$@"\n'
        )
        shim.chmod(0o755)
    venv = project_dir / "scripts" / "venv"
    venv.parent.mkdir(parents=True, exist_ok=True)
    # What scripts/venv leaves: .venv with a Python 3.11 or newer (its check: tests/workflows/test_scripts_venv.py).
    venv.write_text(f"#!/bin/sh\nmkdir -p .venv/bin && ln -sf {json.dumps(sys.executable)} .venv/bin/python\n")
    venv.chmod(0o755)


class Refused(Exception):
    pass


def _state() -> dict:
    path = Path(os.environ[STATE]) / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save(state: dict) -> None:
    (Path(os.environ[STATE]) / "state.json").write_text(json.dumps(state))


def gcloud(args: list[str]) -> int:
    state = _state()
    if args[:2] == ["auth", "login"]:
        state["gcloud_login"] = True
    elif args[:2] == ["auth", "application-default"] and args[2:3] == ["login"]:
        state["adc"] = True
    elif args[:2] in (["services", "enable"], ["projects", "add-iam-policy-binding"]):
        if not state.get("gcloud_login"):
            raise Refused(NO_ACCOUNT)
    else:
        raise Refused(f"ERROR: (gcloud) the stand-in does not model `gcloud {' '.join(args)}`")
    _save(state)
    return 0


def _passphrase() -> str:
    if "PULUMI_CONFIG_PASSPHRASE" in os.environ:
        return os.environ["PULUMI_CONFIG_PASSPHRASE"]
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        return Path(os.environ["PULUMI_CONFIG_PASSPHRASE_FILE"]).read_text().strip()
    raise Refused(f"error: {NO_PASSPHRASE}")


def _stack_file(name: str) -> Path:
    return Path.cwd() / f"Pulumi.{name}.yaml"


def _read(name: str) -> dict:
    path = _stack_file(name)
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def _selected(state: dict) -> str:
    if not state.get("backend"):
        raise Refused(f"error: {NOT_LOGGED_IN}")
    if not state.get("selected"):
        raise Refused(f"error: {NO_STACK}")
    return state["selected"]


def pulumi(args: list[str]) -> int:
    state = _state()
    if args[:1] == ["login"]:
        state["backend"] = args[1] if len(args) > 1 else "cloud"
        _save(state)
        return 0
    if args[:2] == ["stack", "init"]:
        if not state.get("backend"):
            raise Refused(f"error: {NOT_LOGGED_IN}")
        name = args[2]
        if name in state.get("stacks", []):
            raise Refused(f"error: stack '{name}' already exists")
        document = _read(name)
        document["encryptionsalt"] = "v1:" + base64.b64encode(_passphrase().encode()).decode()
        _stack_file(name).write_text(yaml.safe_dump(document))
        state["stacks"] = [*state.get("stacks", []), name]
        state["selected"] = name
        _save(state)
        return 0
    if args == ["stack", "--show-name"]:
        print(_selected(state))
        return 0
    if args[:2] == ["config", "set"] or args[:2] == ["config", "rm"]:
        name = _selected(state)
        rest = [a for a in args[2:] if a != "--secret"]
        secret = "--secret" in args
        document = _read(name)
        config = document.setdefault("config", {})
        if args[1] == "rm":
            config.pop(rest[0], None)
        else:
            value = rest[1] if len(rest) > 1 else sys.stdin.readline().rstrip("\n")
            if secret:
                _passphrase()
                config[rest[0]] = {"secure": "v1:" + base64.b64encode(value.encode()).decode()}
            else:
                config[rest[0]] = value
        _stack_file(name).write_text(yaml.safe_dump(document))
        return 0
    if args[:1] in (["preview"], ["up"]):
        name = _selected(state)
        _passphrase()
        if not (Path.cwd() / ".venv" / "bin" / "python").exists():
            raise Refused(f"error: {NO_VENV}")
        if not state.get("adc"):
            raise Refused(f"error: {NO_ADC}")
        return _run(name, preview=args[0] == "preview", gcloud_logged_in=bool(state.get("gcloud_login")))
    raise Refused(f"error: the stand-in does not model `pulumi {' '.join(args)}`")


def _run(name: str, *, preview: bool, gcloud_logged_in: bool) -> int:
    from pulumi import RunError

    from rehearsal.engine import run_program

    raw = _read(name).get("config", {})
    config = {k: base64.b64decode(v["secure"][3:]).decode() if isinstance(v, dict) else v for k, v in raw.items()}
    secrets = tuple(k for k, v in raw.items() if isinstance(v, dict))
    known = {tuple(k.split("/")): mode for k, mode in json.loads(os.environ.get(RESERVATIONS, "{}")).items()}

    class Printed(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                print(f"warning: {record.getMessage()}", flush=True)

    logging.getLogger().addHandler(Printed())
    try:
        declared = run_program(
            config,
            secret_keys=secrets,
            stack=name,
            preview=preview,
            reservations=known,
            gcloud_logged_in=gcloud_logged_in,
            hub=os.environ["HF_ENDPOINT"],
        )
    except RunError as error:
        raise Refused(f"error: {error}") from None
    print(f"{'would create' if preview else 'created'} {len(declared.resources)} resources")
    return 0


def main(argv: list[str]) -> int:
    tool, *args = argv
    try:
        return {"pulumi": pulumi, "gcloud": gcloud}[tool](args)
    except Refused as refused:
        print(str(refused), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
