"""Every test here runs with HOME at a home holding the gcloud key pair (the program under the mock engine reads
it); the mock-engine fixtures themselves come from tests/fixtures/mock_engine.py, for every folder."""

from tests.fixtures.home import _home  # noqa: F401 (autouse in this folder)
