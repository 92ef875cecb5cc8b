"""Installing MaxText on a host, once: `spec` (the steps, their JSON form and hashes), `seed` (the seed's
install as a spec) and `scheduler` (the steps' host scripts, and running them on one host or every host).
How bootstrap works: ARCHITECTURE.md, "Reaching a new VM"."""
