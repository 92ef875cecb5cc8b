"""tpu-sft: a reserved TPU VM, its SSH firewall, data disk and checkpoint bucket, and the fine-tuning run on it.

Wiring only: settings → the machine → its bucket and data → the post-deploy tasks → exports. Each piece lives in
infra/. The settings are built once (infra/stack.py). A multi-host accelerator type (v6e-16 and up) is a slice's
hosts instead of the VM and its data disk (infra/resources/machine.py); the same tasks run the remote CLI on every host.
A finished run whose hosts are gone publishes from the bucket with none (infra/resources/bucket_publish.py).
"""

import pulumi

from infra import outputs, stack
from infra.plan.on_destroy import model_lost_on_destroy
from infra.resources import apis, bucket, bucket_publish, data_access, machine, publish
from infra.resources.tasks import PostDeployTasks, TasksArgs

settings = stack.settings()
# The APIs the stack calls, enabled by the stack itself, before anything that calls them (infra/resources/apis.py).
services = apis.declare(settings)
# `pulumi destroy` runs no program: the preview and update before it are where a model it would take is named.
if lost := model_lost_on_destroy(settings):
    pulumi.log.warn(lost)

# A finished run whose VM autostop deleted: a new publish destination needs no VM (infra/resources/bucket_publish.py).
if finished := bucket_publish.finished_without_hosts(settings):
    kept = machine.declare_without_hosts(settings, services)
    checkpoints = bucket.checkpoints(settings, kept.service_account_email)
    dataset = data_access.declare(settings, checkpoints.name, kept.service_account_email)
    published = bucket_publish.declare(settings, finished, after=[checkpoints, *dataset])
    outputs.export_without_hosts(settings, kept, checkpoints.url, finished, published)
else:
    hosts = machine.declare(settings, services)
    checkpoints = bucket.checkpoints(settings, hosts.service_account_email)
    dataset = data_access.declare(settings, checkpoints.name, hosts.service_account_email)
    tasks = PostDeployTasks(
        f"{settings.instance_name}-pipeline",
        TasksArgs(
            settings=settings,
            target_json=hosts.target_json(checkpoints.url),
            identity=hosts.identity,
            after=[*hosts.ready, checkpoints, *dataset],
        ),
    )
    publishing = publish.declare(settings, tasks, hosts.service_account_email)
    outputs.export(settings, hosts, checkpoints.url, tasks, publishing)
