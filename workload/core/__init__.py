"""What every layer imports from workload/: the names that cross layers (contract), the pipeline's settings
table (config), the accelerator table (accelerators), and the two things every CLI shares (one_line_parser,
last_resort). Standard library only, importing nothing outside this package: the Pulumi program, the SSH
layer and the rehearsals import it off the VM, and it is shipped to the VM with the rest of workload/.
How the layers fit: ARCHITECTURE.md.
"""
