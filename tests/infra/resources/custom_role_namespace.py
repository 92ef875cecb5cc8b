"""A stand-in for the IAM custom-role namespace of one project, as the Pulumi provider meets it.

Nothing real exists here (IAM is Google's; no emulator of it is published), so this stands in for it, with a clock
the test moves. It enforces what Google documents for a project's custom role IDs:
- an ID matches `[a-zA-Z0-9_.]{3,64}` (IAM REST reference, `projects.roles.create`, `roleId`);
- an ID in use cannot be created again;
- a deleted role can be undeleted for 7 days ("You have 7 days to undelete the custom role", IAM REST reference,
  `projects.roles.delete`); after that it is purged, and its ID cannot be created again until 37 days after the
  deletion ("After the role has been permanently deleted, 37 days after the initial deletion request, you can
  create a new role using the same role ID", cloud.google.com/iam/docs/creating-custom-roles).

`provider_create` is what terraform-provider-google's `google_project_iam_custom_role` does on create
(magic-modules `resource_google_project_iam_custom_role.go`, `resourceGoogleProjectIamCustomRoleCreate`): a
soft-deleted role of that ID is undeleted and updated; otherwise it creates, which fails on a taken ID.

Not enforced: the project's limit on the number of custom roles (300), permission validity, role stages, etags,
and whether Google answers 404 or a deleted role to a get during the purge window (either way the create fails).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ROLE_ID = re.compile(r"[a-zA-Z0-9_.]{3,64}")
UNDELETE_DAYS = 7
REUSE_AFTER_DAYS = 37


class RoleIdRefused(Exception):
    """What Google answers to a create it refuses (400 for a bad ID, 409 for a taken one)."""


@dataclass
class CustomRoleNamespace:
    today: float = 0.0  # days since the test began
    active: set[tuple[str, str]] = field(default_factory=set)  # (project, role id)
    deleted_on: dict[tuple[str, str], float] = field(default_factory=dict)

    def create(self, project: str, role_id: str) -> None:
        if not ROLE_ID.fullmatch(role_id):
            raise RoleIdRefused(f"400 INVALID_ARGUMENT: role id {role_id!r} does not match {ROLE_ID.pattern}")
        key = (project, role_id)
        if key in self.active:
            raise RoleIdRefused(f"409 ALREADY_EXISTS: projects/{project}/roles/{role_id}")
        deleted = self.deleted_on.get(key)
        if deleted is not None and self.today - deleted < REUSE_AFTER_DAYS:
            raise RoleIdRefused(
                f"409 ALREADY_EXISTS: projects/{project}/roles/{role_id} was deleted "
                f"{self.today - deleted:g} days ago; its id is reusable {REUSE_AFTER_DAYS} days after"
            )
        self.deleted_on.pop(key, None)
        self.active.add(key)

    def delete(self, project: str, role_id: str) -> None:
        self.active.remove((project, role_id))
        self.deleted_on[(project, role_id)] = self.today

    def undeletable(self, project: str, role_id: str) -> bool:
        deleted = self.deleted_on.get((project, role_id))
        return deleted is not None and self.today - deleted < UNDELETE_DAYS

    def provider_create(self, project: str, role_id: str) -> None:
        if self.undeletable(project, role_id):
            del self.deleted_on[(project, role_id)]
            self.active.add((project, role_id))
            return
        self.create(project, role_id)
