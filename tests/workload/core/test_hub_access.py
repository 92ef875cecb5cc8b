"""Whether a token may download a gated model, asked of the Hub stand-in as the data preflight asks the Hub."""

from tests.hub_download_standin import serving
from workload.core import hub_access

REPO = "google/gemma-3-4b-it"
GRANTED, UNGRANTED = "hf_" + "Granted1" * 4, "hf_" + "NotYet22" * 4


def ask(monkeypatch, token):
    with serving(REPO, {"config.json": b"{}"}, token=GRANTED, ungranted=frozenset({UNGRANTED})) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        access = hub_access.check(REPO, token)
    return access, hub


def test_a_granted_token_may_download(monkeypatch):
    access, hub = ask(monkeypatch, GRANTED)
    assert access.granted is True
    (request,) = hub.requests
    assert request.path == f"/api/models/{REPO}/auth-check" and request.authorization == f"Bearer {GRANTED}"


def test_a_token_whose_account_has_not_accepted_the_licence_is_refused_without_echoing_it(monkeypatch):
    access, _ = ask(monkeypatch, UNGRANTED)
    assert access.granted is False and "not been granted access to the gated model" in access.why
    assert UNGRANTED not in access.why


def test_no_token_and_an_unknown_token_are_refused(monkeypatch):
    assert ask(monkeypatch, None)[0].why.startswith("no token was given")
    unknown = "hf_" + "Unknown3" * 4
    access, _ = ask(monkeypatch, unknown)
    assert access.granted is False and unknown not in access.why


def test_an_unreachable_hub_is_not_a_refusal(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard: nothing listens
    access = hub_access.check(REPO, GRANTED)
    assert access.granted is None and GRANTED not in access.why
