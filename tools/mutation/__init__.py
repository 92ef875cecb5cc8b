"""The mutation run: would a test notice if a protection were removed? A tool for developers, not a test or a
benchmark: `python -m tools.mutation --help` (run.py); how to read its scores, docs/development.md."""
