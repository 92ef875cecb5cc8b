"""The fixture every test of the stack's commands shares: the rehearsal stack's outputs."""

import pytest

from rehearsal.fresh_vm.rehearse import CONFIG, identity_overrides
from rehearsal.run import record
from rehearsal.sshd import keygen


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """The rehearsal stack's outputs, as `pulumi up` would leave them (its key pair made for the module)."""
    stack, _ = record(CONFIG, identity_overrides(keygen(tmp_path_factory.mktemp("stack") / "id_ed25519")))
    return stack.outputs
