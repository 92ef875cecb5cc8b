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
"""

from __future__ import annotations

import os
import sys

EXIT_NO_PUNKT = 3


def _refuse_download(resource: str, *args: object, **kwargs: object) -> bool:
    print(f"lm_eval_offline: NLTK's {resource} is not installed and is not downloaded here", file=sys.stderr)
    return False


def main(argv: list[str]) -> int:
    require_punkt = "--require-punkt" in argv[:3]
    rest = [a for a in argv if a != "--require-punkt"]
    if rest[:1] == ["--chdir"]:
        os.chdir(rest[1])
        rest = rest[2:]
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab")
    except LookupError:
        if require_punkt:
            print(
                f"lm_eval_offline: NLTK's punkt_tab is not in {os.pathsep.join(nltk.data.path)}, and IFEval needs it: "
                "run bootstrap again (it installs punkt_tab into the eval venv)",
                file=sys.stderr,
            )
            return EXIT_NO_PUNKT
        nltk.download = _refuse_download
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm-eval", *rest]
    cli_evaluate()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
