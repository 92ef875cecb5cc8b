"""How each MaxText process is started and watched: its environment, its place in a JAX job, its secrets, the
trainer's own launcher, and why a process ended.
"""
