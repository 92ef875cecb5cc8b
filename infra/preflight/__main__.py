"""`python -m infra.preflight` (scripts/preflight): the stack's training step compiled before any VM exists
(infra/preflight/compile_step.py)."""

import sys

from infra.preflight.compile_step import main, stop_on_sigterm

stop_on_sigterm()
sys.exit(main())
