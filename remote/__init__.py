"""The remote layer: how every post-deploy task reaches the VM over SSH (Fabric), with no Pulumi in it.

target      where to connect (JSON in $TPU_SFT_TARGET)      connection  pinned, timed-out Fabric connections
wait        wait_for_ssh for a fresh VM                      bootstrap   fingerprinted, resumable install
jobs        detached jobs: start, status, follow, cancel    sync        push_tree and fetch, sha256-verified
group       one command on every host                        cli         `python -m remote VERB`
profile     what kind of host (VM, local rehearsal)          errors      one failure type, the exit codes
phase       one pipeline phase: phase_request → ship (code, token, mount) → claim → follow
slice_phase the same on every worker of a slice: workers (connect, fan out) → ship → slice_claim → follow 0, watch rest
"""
