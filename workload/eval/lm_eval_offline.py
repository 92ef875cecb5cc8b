"""lm-eval's own CLI, with NLTK kept off the network. Runs in the eval venv:

    python -m workload.eval.lm_eval_offline [--require-punkt] [--chdir DIR] LM_EVAL_ARGS...

lm-eval 0.4.13's IFEval imports `instructions_util.py`, which calls `nltk.download("punkt_tab")` at import when NLTK
cannot find it (`nltk.data.find("tokenizers/punkt_tab")`): on a machine without the network that either hangs on
the network or prints an error and goes on, and the sentence and capital-word counts of some IFEval instructions
then raise. On a VM, bootstrap puts punkt_tab in the eval venv (`<venv>/share/nltk_data`, on NLTK's own search path)
beside the packages, so the find succeeds; with `--require-punkt` (the real IFEval) a missing punkt_tab stops the
eval in one line before lm-eval starts. Without it (the rehearsal's fixture IFEval, whose instructions need no
punkt_tab) NLTK's download is replaced by a refusal that says so in one line, and nothing reaches the network.
`--chdir`: where lm-eval runs (a fixture task's data_files are relative to its folder).

`--wait-for URL --server-pid PID --wait-s S`: lm-eval's import (torch, datasets, NLTK: ~20 s of a loaded CPU) runs
while the server loads its model; then this waits until the server lists a model at URL (`/v1/models`), and stops in
one line if process PID ends first or S seconds pass.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request

EXIT_NO_PUNKT = 3
EXIT_NO_SERVER = 4


def _refuse_download(resource: str, *args: object, **kwargs: object) -> bool:
    print(f"lm_eval_offline: NLTK's {resource} is not installed and is not downloaded here", file=sys.stderr)
    return False


def _flags(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """This wrapper's own flags (before lm-eval's `run`) and lm-eval's arguments."""
    ours: dict[str, str] = {}
    while argv and argv[0].startswith("--"):
        name = argv.pop(0)
        ours[name] = "" if name == "--require-punkt" else argv.pop(0)
    return ours, argv


def _alive(pid: int) -> bool:
    """Whether `pid` runs: the step that started it reaps it only once this ends, so an exited server is a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_for_server(url: str, pid: int, wait_s: float) -> str | None:
    """None once the server answers; otherwise why it will not."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200 and json.load(response).get("data"):
                    return None
        except (OSError, ValueError):
            pass
        if not _alive(pid):
            return f"the server (pid {pid}) exited before it answered at {url}"
        if time.monotonic() > deadline:
            return f"the server did not answer at {url} in {wait_s:g} s"
        time.sleep(0.5)


def main(argv: list[str]) -> int:
    ours, rest = _flags(list(argv))
    if "--chdir" in ours:
        os.chdir(ours["--chdir"])
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab")
    except LookupError:
        if "--require-punkt" in ours:
            print(
                f"lm_eval_offline: NLTK's punkt_tab is not in {os.pathsep.join(nltk.data.path)}, and IFEval needs it: "
                "run bootstrap again (it installs punkt_tab into the eval venv)",
                file=sys.stderr,
            )
            return EXIT_NO_PUNKT
        nltk.download = _refuse_download
    from lm_eval.__main__ import cli_evaluate

    if "--wait-for" in ours:
        why = _wait_for_server(ours["--wait-for"], int(ours["--server-pid"]), float(ours["--wait-s"]))
        if why is not None:
            print(f"lm_eval_offline: {why}; see {ours.get('--server-log', 'its log')}", file=sys.stderr)
            return EXIT_NO_SERVER
    sys.argv = ["lm-eval", *rest]
    cli_evaluate()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
