"""argparse for tools whose callers are scripts: a usage error is one line (what is wrong, where the help
is) and exits with the CLI's own bad-input code, not argparse's usage block and exit 2."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    bad_input_exit = 2  # a CLI sets its own in a subclass; its subcommands' parsers inherit the class

    @classmethod
    def from_doc(cls, prog: str, doc: str) -> OneLineParser:
        """A CLI whose help is its module's docstring, as written: the first paragraph, then the rest."""
        intro, epilog = doc.split("\n\n", 1)
        return cls(prog=prog, description=intro, epilog=epilog, formatter_class=argparse.RawTextHelpFormatter)

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}. Fix: see `{self.prog} --help`", file=sys.stderr)
        sys.exit(self.bad_input_exit)
