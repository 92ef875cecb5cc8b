"""Preflight: compile the training step for a TPU topology here, without one, and say whether it fits."""
