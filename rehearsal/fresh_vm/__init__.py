"""The fresh-VM rehearsal: a simulated new Compute Engine VM, played from what the program declared.

image (boot disk), disk (the data disk as a loop device), address (its own loopback address), guest
(the VM's first-boot timeline, run inside it), machine (create and delete), declared (what the program
declared), substitutions (the real bootstrap spec, transformed where this machine cannot follow it),
rehearse (the whole `pulumi up` against it).
"""
