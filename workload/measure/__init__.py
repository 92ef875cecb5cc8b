"""Measuring and verifying a run: throughput, HBM, the held-out loss, the loss curve, and the checks of the
export (transformers loads it, its logits match, before/after samples).
"""
