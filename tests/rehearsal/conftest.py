"""The mock-engine fixtures of tests/infra (the shipped dev stack, a home with the gcloud key pair, the program
run under the mock engine), for the tests here that run the program too."""

from tests.infra.conftest import _home, dev_config, gcloud_home, mock_stack  # noqa: F401
