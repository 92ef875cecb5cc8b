"""Google's rules for the names and labels a program declares, as the services apply them to a create request: the
mock engine (rehearsal/engine.py) refuses a resource whose name (after Pulumi's auto-naming, rehearsal/autonaming.py)
or labels break its service's rule, with an error worded like the service's 400, and the program's run fails.

Enforced, each from Google's reference (the Compute Engine error is Google's own wording; the others are worded
here, with the 400's shape):
- Compute Engine, every `gcp:compute/*` resource with a `name`: 1-63 characters matching `[a-z]([-a-z0-9]*[a-z0-9])?`
  (cloud.google.com/compute/docs/naming-resources, "Naming convention"; the 400 reads "Invalid value for field
  'resource.name': … Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'", as quoted in
  github.com/skypilot-org/skypilot/issues/139).
- a managed instance group's `baseInstanceName`:
  `[a-z](([-a-z0-9]{0,57})|([-a-z0-9]{0,51}-#{1,10}(\\[[0-9]{1,10}\\])?))` (Compute API reference,
  InstanceGroupManager.baseInstanceName: "The maximum character length is 58 and the name must comply with RFC1035").
- Cloud Storage bucket names (cloud.google.com/storage/docs/buckets, "Bucket names"): lowercase letters, digits,
  `-` and `_`; starting and ending with a letter or digit; 3-63 characters; not beginning with "goog"; not containing
  "google" or a close misspelling. Dotted names are refused: they need domain verification, which no stack here has.
- custom role IDs, project or organization: `[a-zA-Z0-9_.]{3,64}` (IAM REST reference, projects.roles.create,
  `roleId`).
- service account IDs: 6-30 characters matching `[a-z]([-a-z0-9]*[a-z0-9])` (IAM REST reference,
  projects.serviceAccounts.create, `accountId`).
- labels, on every `gcp:` resource that has them (cloud.google.com/compute/docs/labeling-resources, "Requirements
  for labels"; Cloud Storage's are the same): a key is 1-63 characters and starts with a lowercase letter, a value
  is 0-63 characters, both of lowercase letters, digits, '_' and '-'; at most 64 labels on a resource.

Not enforced: uniqueness (within a project or zone, or Cloud Storage's global namespace); misspellings of "google"
other than digits for its letters ("g00gle", the documented example), since Google lists none; a dotted bucket name's
own rules (up to 222 characters, 63 per component) and IP-address look-alikes, which only dotted names can be; the
international characters Google also allows in label keys and values (any character outside ASCII passes here, as
no rule says which of them count as lowercase letters); per-resource exceptions to the Compute Engine rule for types
the program does not declare. Google refuses at create, so at `pulumi up`; this refuses at preview too, which is
stricter.
"""

from __future__ import annotations

import re
from typing import Any, Callable

_RFC1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
COMPUTE_NAME = re.compile(_RFC1035)
COMPUTE_NAME_MAX = 63
BASE_INSTANCE_NAME = re.compile(r"[a-z](([-a-z0-9]{0,57})|([-a-z0-9]{0,51}-#{1,10}(\[[0-9]{1,10}\])?))")
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")
ROLE_ID = re.compile(r"[a-zA-Z0-9_.]{3,64}")
ACCOUNT_ID = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])")
ACCOUNT_ID_LENGTH = range(6, 31)
_DIGITS_FOR_LETTERS = str.maketrans("01", "ol")
# Characters outside ASCII stand in for the international characters Google allows; ASCII ones are checked.
LABEL_KEY = re.compile("[a-z\u0080-\U0010ffff][-a-z0-9_\u0080-\U0010ffff]{0,62}")
LABEL_VALUE = re.compile("[-a-z0-9_\u0080-\U0010ffff]{0,63}")
LABELS_MAX = 64


class NameRefused(Exception):
    """What the service answers to a create request with a name it refuses: a 400."""


def _known(state: dict[str, Any], field: str) -> str | None:
    """The field's value, or None where it is absent or not known yet (a preview's unknown output: Google sees the
    value only at `pulumi up`, and the run that has it checks it then)."""
    value = state.get(field)
    return value if isinstance(value, str) else None


def _compute_400(field: str, value: str) -> NameRefused:
    return NameRefused(
        f"googleapi: Error 400: Invalid value for field 'resource.{field}': '{value}'. "
        "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)', invalid"
    )


def compute_names(state: dict[str, Any]) -> None:
    name = _known(state, "name")
    if name is not None and (len(name) > COMPUTE_NAME_MAX or not COMPUTE_NAME.fullmatch(name)):
        raise _compute_400("name", name)


def instance_group_manager(state: dict[str, Any]) -> None:
    compute_names(state)
    base = _known(state, "baseInstanceName")
    if base is not None and not BASE_INSTANCE_NAME.fullmatch(base):
        raise NameRefused(
            f"googleapi: Error 400: Invalid value for field 'resource.baseInstanceName': '{base}'. "
            f"Must be a match of regex '{BASE_INSTANCE_NAME.pattern}', invalid"
        )


def bucket_name_problem(name: str) -> str | None:
    """Why Cloud Storage refuses this bucket name (without domain verification), or None."""
    if "." in name:
        return "names containing dots require domain verification"
    if not BUCKET_NAME.fullmatch(name):
        return "3-63 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit"
    if name.startswith("goog"):
        return 'names cannot begin with "goog"'
    if "google" in name.translate(_DIGITS_FOR_LETTERS):
        return 'names cannot contain "google" or close misspellings'
    return None


def bucket(state: dict[str, Any]) -> None:
    name = _known(state, "name")
    problem = bucket_name_problem(name) if name is not None else None
    if problem:
        raise NameRefused(f"googleapi: Error 400: Invalid bucket name: '{name}' ({problem}), invalid")


def custom_role(state: dict[str, Any]) -> None:
    role_id = _known(state, "roleId")
    if role_id is not None and not ROLE_ID.fullmatch(role_id):
        raise NameRefused(
            f"googleapi: Error 400: Invalid role_id '{role_id}': it must match {ROLE_ID.pattern}, invalid"
        )


def service_account(state: dict[str, Any]) -> None:
    account_id = _known(state, "accountId")
    if account_id is not None and (len(account_id) not in ACCOUNT_ID_LENGTH or not ACCOUNT_ID.fullmatch(account_id)):
        raise NameRefused(
            f"googleapi: Error 400: Invalid account_id '{account_id}': it must be 6-30 characters "
            f"matching {ACCOUNT_ID.pattern}, invalid"
        )


_BY_TYPE: dict[str, Callable[[dict[str, Any]], None]] = {
    "gcp:compute/instanceGroupManager:InstanceGroupManager": instance_group_manager,
    "gcp:storage/bucket:Bucket": bucket,
    "gcp:projects/iAMCustomRole:IAMCustomRole": custom_role,
    "gcp:organizations/iAMCustomRole:IAMCustomRole": custom_role,
    "gcp:serviceaccount/account:Account": service_account,
}


def refuse_invalid_labels(type_: str, state: dict[str, Any]) -> None:
    """Raise `NameRefused` where Google would refuse the labels in `state` (any `gcp:` resource's `labels`)."""
    labels = state.get("labels")
    if not type_.startswith("gcp:") or not isinstance(labels, dict):
        return
    if len(labels) > LABELS_MAX:
        raise NameRefused(
            f"googleapi: Error 400: Invalid value for field 'resource.labels': {len(labels)} labels, "
            f"at most {LABELS_MAX} are allowed, invalid"
        )
    for key, value in labels.items():
        if not LABEL_KEY.fullmatch(key):
            raise NameRefused(
                f"googleapi: Error 400: Invalid value for field 'resource.labels': '{key}'. Label key "
                f"'{key}' violates format constraints: 1-63 lowercase letters, digits, '_' or '-', "
                "starting with a lowercase letter, invalid"
            )
        if isinstance(value, str) and not LABEL_VALUE.fullmatch(value):
            raise NameRefused(
                f"googleapi: Error 400: Invalid value for field 'resource.labels': '{value}'. Label "
                f"value '{value}' violates format constraints: at most 63 lowercase letters, digits, "
                "'_' or '-', invalid"
            )


def refuse_invalid_names(type_: str, state: dict[str, Any]) -> None:
    """Raise `NameRefused` where the service that owns `type_` would refuse the names in `state`."""
    check = _BY_TYPE.get(type_) or (compute_names if type_.startswith("gcp:compute/") else None)
    if check:
        check(state)
