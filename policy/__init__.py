"""tpu-sft's CrossGuard policy pack: the team's rules for the resources the program declares.

Each rule is a pure function of a resource's arguments (in `firewall`, `instance`, `labels`, `disk`, `external_ip`),
so it can be tested without an engine. `catalog` names the rules and their enforcement levels and runs them
over any list of resources (`check_resource`, `check_stack`); `crossguard` hands the same rules to Pulumi;
`__main__` is the pack's entry point.
"""
