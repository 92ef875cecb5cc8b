"""Cloud Storage's predefined IAM roles, as data: role → the `storage.*` permissions it holds. The IAM stand-in
(rehearsal/storage_iam.py) allows a request only if the roles bound to its caller on the bucket hold the
permissions Google requires for it (rehearsal/storage_requests.py).

Source: Google's "IAM roles for Cloud Storage" (https://cloud.google.com/storage/docs/access-control/iam-roles),
each list as the IAM API's `roles.get` returns it (`gcloud iam roles describe roles/storage.<role>`), read in
iann0036/iam-dataset gcp/roles/storage.<role>.json. Only the `storage.*` permissions are kept: the others
(resourcemanager.projects.get, orgpolicy.policy.get) guard no Cloud Storage request. Only the roles this
program grants or could reasonably grant are listed; a binding of any other role is refused by the stand-in
rather than guessed (add its row here, from the same source).
"""

from __future__ import annotations

_OBJECT_USER = frozenset(
    {
        "storage.folders.create",
        "storage.folders.delete",
        "storage.folders.get",
        "storage.folders.list",
        "storage.folders.rename",
        "storage.managedFolders.create",
        "storage.managedFolders.delete",
        "storage.managedFolders.get",
        "storage.managedFolders.list",
        "storage.multipartUploads.abort",
        "storage.multipartUploads.create",
        "storage.multipartUploads.list",
        "storage.multipartUploads.listParts",
        "storage.objects.create",
        "storage.objects.delete",
        "storage.objects.get",
        "storage.objects.list",
        "storage.objects.move",
        "storage.objects.restore",
        "storage.objects.update",
    }
)

_LEGACY_BUCKET_READER = frozenset({"storage.buckets.get", "storage.multipartUploads.list", "storage.objects.list"})

PREDEFINED_ROLES: dict[str, frozenset[str]] = {
    "roles/storage.objectUser": _OBJECT_USER,
    "roles/storage.objectAdmin": _OBJECT_USER
    | {
        "storage.objects.getIamPolicy",
        "storage.objects.setIamPolicy",
        "storage.objects.setRetention",
        "storage.objects.overrideUnlockedRetention",
    },
    "roles/storage.objectViewer": frozenset(
        {
            "storage.folders.get",
            "storage.folders.list",
            "storage.managedFolders.get",
            "storage.managedFolders.list",
            "storage.objects.get",
            "storage.objects.list",
        }
    ),
    "roles/storage.objectCreator": frozenset(
        {
            "storage.folders.create",
            "storage.managedFolders.create",
            "storage.multipartUploads.abort",
            "storage.multipartUploads.create",
            "storage.multipartUploads.listParts",
            "storage.objects.create",
            "storage.objects.createContext",
        }
    ),
    # The legacy roles can be granted on a bucket only, never on a project (same page). The writer holds every
    # permission of the reader, as objectAdmin holds objectUser's.
    "roles/storage.legacyBucketReader": _LEGACY_BUCKET_READER,
    "roles/storage.legacyBucketWriter": _LEGACY_BUCKET_READER
    | {
        "storage.multipartUploads.abort",
        "storage.multipartUploads.create",
        "storage.multipartUploads.listParts",
        "storage.objects.create",
        "storage.objects.delete",
    },
    "roles/storage.legacyObjectReader": frozenset({"storage.objects.get"}),
}
