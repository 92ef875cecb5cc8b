"""The tiny profile: a small Gemma 3 built locally, and the launcher that points MaxText's gemma3-4b at it."""
