"""`python -m infra.plan`: which pipeline phases a config change would re-run (infra/plan/reruns.py)."""

import sys

from infra.plan.reruns import main

sys.exit(main())
