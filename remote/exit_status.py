"""How both of remote's CLIs (`python -m remote`, `scripts/tpu-sft`) end a verb: its exit code, or one line on stderr
and the code that says what went wrong; never a traceback (the last resort keeps it in a 0600 log, secrets
redacted)."""

from __future__ import annotations

import sys
from typing import Callable, Sequence

from remote.ssh.errors import EXIT_BAD_INPUT, RemoteError
from workload.core import last_resort
from workload.core.config import ConfigError
from workload.core.contract import EXIT_UNEXPECTED


def exit_status(verb: Callable[[], int], *, interrupted: str, secrets: Sequence[str | None]) -> int:
    """`verb()`'s exit code; on Ctrl-C, `interrupted` (what goes on without this process) and 130."""
    try:
        return verb()
    except RemoteError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"interrupted ({interrupted})", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001  the last resort: one line and a log, never a traceback
        print(f"error: {last_resort.report('remote', error, secrets)}", file=sys.stderr)
        return EXIT_UNEXPECTED
