"""The pipeline's phases on the VM or a slice, over the SSH toolkit (remote/ssh/): what each `pulumi up` task
runs. How a phase runs, on one host and on a slice: ARCHITECTURE.md. `profile` stays free of Fabric: the
Pulumi program imports it."""
