"""The Compute Engine stand-in enforces what Google's reference says of reservations.get, as
remote/stack/reservation.py reads it: a bearer token, the zone, the mode."""

import json
import urllib.error
import urllib.request

import pytest

from rehearsal.compute_standin import TOKEN, serving
from remote.stack import reservation

PROJECT, ZONE = "my-tpu-project", "us-east5-b"


@pytest.fixture
def compute(monkeypatch):
    held = {(PROJECT, ZONE, "cal"): "CALENDAR", (PROJECT, ZONE, "plain"): "DEFAULT"}
    with serving(held) as standin:
        monkeypatch.setenv("TPU_SFT_COMPUTE_API", standin.url)
        yield standin


def test_the_mode_is_read_and_an_ordinary_reservation_leaves_it_out(compute):
    assert reservation.read(PROJECT, ZONE, "cal", token=lambda: TOKEN).mode == "CALENDAR"
    assert reservation.read(PROJECT, ZONE, "plain", token=lambda: TOKEN).mode == "DEFAULT"
    url = f"{compute.url}/compute/beta/projects/{PROJECT}/zones/{ZONE}/reservations/plain"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request) as response:
        assert "reservationMode" not in json.load(response)


def test_a_reservation_is_zonal(compute):
    assert reservation.read(PROJECT, "us-central1-a", "cal", token=lambda: TOKEN).mode == reservation.MISSING


def test_no_credential_is_refused_as_google_refuses_it(compute):
    url = f"{compute.url}/compute/beta/projects/{PROJECT}/zones/{ZONE}/reservations/cal"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url)
    assert refused.value.code == 401
    assert reservation.read(PROJECT, ZONE, "cal", token=lambda: "ya29.other").reason == "Compute Engine answered 401"


def test_an_account_without_the_permission_gets_403(monkeypatch):
    with serving({(PROJECT, ZONE, "cal"): "CALENDAR"}, denied=True) as standin:
        monkeypatch.setenv("TPU_SFT_COMPUTE_API", standin.url)
        read = reservation.read(PROJECT, ZONE, "cal", token=lambda: TOKEN)
    assert read.mode is None and read.reason == "Compute Engine answered 403"
