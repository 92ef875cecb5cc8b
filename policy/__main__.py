"""Entry point of the tpu-sft policy pack: `pulumi preview --policy-pack policy`."""

import sys
from pathlib import Path

# The engine runs this file by path, with only policy/ on sys.path; the rules import as the `policy` package
# (as the tests import them), so the repository root goes first.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi.runtime import get_config_env  # noqa: E402
from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policy.crossguard import PACK_NAME, policies  # noqa: E402

# The engine hands every policy pack the stack's config in PULUMI_CONFIG, as it does the program.
PolicyPack(
    name=PACK_NAME,
    policies=policies(get_config_env()),
    enforcement_level=EnforcementLevel.MANDATORY,
)
