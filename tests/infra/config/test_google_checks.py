"""At `pulumi preview`, before anything is declared: the token's access to the gated model, asked of the Hub stand-in,
and the reservation's mode against the provisioning model, asked of the Compute Engine stand-in; one line each."""

import pytest
from pulumi import RunError

from rehearsal.engine import Stack, run_program
from tests.hub_download_standin import serving
from workload.core.models import MODELS

REPO = MODELS["gemma3-4b"].hub_id
GRANTED, UNGRANTED = "hf_" + "Granted1" * 4, "hf_" + "NotYet22" * 4
SECRET = ("tpu-sft:hfToken",)


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def refused(config, **kwargs) -> str:
    """The one line a preview stops with, having declared nothing."""
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program(config, into=declared, **kwargs)
    assert declared.resources == []
    message = str(raised.value)
    assert "\n" not in message
    return message


def reservation_of(config, mode):
    return {(config["gcp:project"], config["gcp:zone"], config["tpu-sft:reservation"]): mode}


def test_the_example_stack_with_its_calendar_reservation_goes_ahead(dev_config, caplog):
    assert dev_config["tpu-sft:provisioningModel"] == "RESERVATION_BOUND"
    assert run_program(dev_config).resources
    assert not [w for w in warnings(caplog) if "tpu-sft:reservation" in w or "hfToken" in w]


def test_reservation_bound_with_an_ordinary_reservation_is_refused_with_the_fix(dev_config):
    message = refused(dev_config, reservations=reservation_of(dev_config, "DEFAULT"))
    assert message == (
        "tpu-sft:provisioningModel: is RESERVATION_BOUND, which consumes a calendar-mode (future) reservation, but "
        "my-v6e-reservation is an ordinary reservation. Fix: pulumi config set tpu-sft:provisioningModel STANDARD"
    )


def test_standard_with_a_calendar_reservation_is_refused_with_the_fix(dev_config):
    config = {**dev_config, "tpu-sft:provisioningModel": "STANDARD"}
    message = refused(config, reservations=reservation_of(config, "CALENDAR"))
    assert message.startswith("tpu-sft:provisioningModel: is STANDARD, which consumes an ordinary reservation, but")
    assert message.endswith("Fix: pulumi config set tpu-sft:provisioningModel RESERVATION_BOUND")


def test_standard_with_an_ordinary_reservation_goes_ahead(dev_config):
    config = {**dev_config, "tpu-sft:provisioningModel": "STANDARD"}
    assert run_program(config, reservations=reservation_of(config, "DEFAULT")).resources


def test_a_reservation_compute_engine_does_not_have_in_the_zone_is_refused(dev_config):
    elsewhere = {(dev_config["gcp:project"], "us-central1-a", dev_config["tpu-sft:reservation"]): "CALENDAR"}
    message = refused(dev_config, reservations=elsewhere)
    assert message.startswith("tpu-sft:reservation: Compute Engine has no reservation my-v6e-reservation in project")
    assert "gcloud compute reservations list" in message


def test_a_shared_reservation_is_read_from_its_owners_project(dev_config):
    config = {**dev_config, "tpu-sft:reservation": "projects/owner-project/reservations/shared-v6e"}
    ordinary = {("owner-project", config["gcp:zone"], "shared-v6e"): "DEFAULT"}
    assert "is RESERVATION_BOUND" in refused(config, reservations=ordinary)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"gcloud_logged_in": False}, "You do not currently have an active account selected"),
        ({"compute_denied": True}, "Compute Engine answered 403"),
    ],
)
def test_where_the_reservation_cannot_be_read_a_line_says_so_and_the_preview_goes_on(dev_config, caplog, answer, said):
    assert run_program(dev_config, **answer).resources
    (line,) = [w for w in warnings(caplog) if w.startswith("tpu-sft:reservation:")]
    assert line.startswith("tpu-sft:reservation: my-v6e-reservation not checked (") and said in line
    assert line.endswith("; the VM's creation will tell")


def test_spot_asks_compute_engine_nothing(dev_config, caplog):
    config = {**dev_config, "tpu-sft:provisioningModel": "SPOT"}
    config.pop("tpu-sft:reservation")
    assert run_program(config, gcloud_logged_in=False).resources
    assert not [w for w in warnings(caplog) if "tpu-sft:reservation" in w]


def hub(token):
    return serving(REPO, {"config.json": b"{}"}, token=GRANTED, ungranted=frozenset({UNGRANTED}))


def test_a_token_without_access_to_the_gated_model_is_refused_at_preview_naming_its_licence_page(dev_config):
    with hub(UNGRANTED) as standin:
        message = refused({**dev_config, "tpu-sft:hfToken": UNGRANTED}, secret_keys=SECRET, hub=standin.endpoint)
    assert message == (
        f"tpu-sft:hfToken: the token's account has not been granted access to the gated model {REPO}. Fix: accept the "
        f"licence at https://huggingface.co/{REPO} signed in as the token's owner, or `pulumi config set --secret "
        "tpu-sft:hfToken` with a token of an account that has"
    )
    assert UNGRANTED not in message
    (asked,) = standin.requests
    assert asked.path == f"/api/models/{REPO}/auth-check" and asked.authorization == f"Bearer {UNGRANTED}"


def test_a_token_from_the_environment_is_asked_about_too_and_a_granted_one_goes_ahead(dev_config, monkeypatch, caplog):
    monkeypatch.setenv("HF_TOKEN", GRANTED)
    with hub(GRANTED) as standin:
        assert run_program(dev_config, hub=standin.endpoint).resources
    assert [r.authorization for r in standin.requests] == [f"Bearer {GRANTED}"]
    assert not [w for w in warnings(caplog) if "hfToken" in w]


def test_an_unreachable_hub_is_one_line_without_the_token_and_the_preview_goes_on(dev_config, caplog):
    assert run_program({**dev_config, "tpu-sft:hfToken": UNGRANTED}, secret_keys=SECRET).resources
    (line,) = [w for w in warnings(caplog) if w.startswith("tpu-sft:hfToken:")]
    assert f"not checked against {REPO}" in line and UNGRANTED not in line
    assert not any(UNGRANTED in w for w in warnings(caplog))


def test_no_token_and_the_tiny_profile_ask_the_hub_nothing(dev_config, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with hub(None) as standin:
        run_program(dev_config, hub=standin.endpoint)
        tiny = {**dev_config, "tpu-sft:hfToken": GRANTED, "tpu-sft:profile": "tiny"}
        run_program(tiny, secret_keys=SECRET, hub=standin.endpoint)
    assert standin.requests == []
