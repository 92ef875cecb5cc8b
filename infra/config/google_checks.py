"""What the stack's settings need of the world outside the stack, asked from where the program runs, at every
`pulumi preview` and `pulumi up`, before anything is declared: what would otherwise fail on a VM already billing.

- the gated model: the token (tpu-sft:hfToken, else $HF_TOKEN) must have been granted the model's repository, asked
  of the Hub as huggingface_hub's `auth_check` asks (workload/core/hub_access.py). No token (a CI preview): nothing is
  asked; an update without one is refused earlier (infra/config/read_settings.py `require_token_for_update`);
- the reservation: RESERVATION_BOUND consumes a calendar-mode reservation, STANDARD an ordinary one
  (infra/config/cross_key_rules.py `RESERVATION_MODELS`), read from Compute Engine (remote/stack/reservation.py).

A refusal is a `ConfigError`, one line with the fix; where the Hub or Compute Engine cannot be asked (no network, no
gcloud login, no permission, the API not yet enabled in an empty project), `check` returns one line that says so, and
the program goes on. The token never enters a line.
"""

from __future__ import annotations

from typing import Callable, Mapping

from infra.config.cross_key_rules import RESERVATION_MODELS
from infra.config.settings import Settings
from remote.stack import reservation as compute_reservation
from workload.core import hub_access
from workload.core.config import ConfigError, set_hint, stack_key
from workload.core.models import MODELS

# The mode each provisioning model that consumes a reservation needs, and the model that consumes the other mode.
NEEDED_MODE = {"RESERVATION_BOUND": compute_reservation.CALENDAR, "STANDARD": compute_reservation.DEFAULT}
MODE_WORDS = {
    compute_reservation.CALENDAR: "a calendar-mode (future) reservation",
    compute_reservation.DEFAULT: "an ordinary reservation",
}


def licence_page(repository: str) -> str:
    """Where a gated model's licence is accepted: its page on the Hub, signed in as the token's owner."""
    return f"https://huggingface.co/{repository}"


def gated_model(
    s: Settings, environ: Mapping[str, str], ask: Callable[[str, str | None], hub_access.Access] = hub_access.check
) -> str | None:
    """Refuses a token the Hub has not granted the model; returns a line where the Hub could not be asked."""
    token = s.hf_token or environ.get("HF_TOKEN")
    if s.pipeline.profile != "full" or not token:
        return None
    repository = MODELS[s.pipeline.model].hub_id
    access = ask(repository, token)
    if access.granted is None:
        return f"tpu-sft:hfToken: not checked against {repository}: {access.why}; the VM's download will tell"
    if not access.granted:
        raise ConfigError(
            stack_key("hfToken"),
            access.why,
            f"accept the licence at {licence_page(repository)} signed in as the token's owner, or "
            "`pulumi config set --secret tpu-sft:hfToken` with a token of an account that has",
        )
    return None


def reservation_mode(
    s: Settings, read: Callable[[str, str, str], compute_reservation.ReservationRead] = compute_reservation.read
) -> str | None:
    """Refuses a reservation that does not exist in the zone, or whose mode the provisioning model cannot consume;
    returns a line where Compute Engine could not be asked."""
    if s.provisioning_model not in RESERVATION_MODELS or not s.reservation:
        return None
    found = read(s.project, s.zone, s.reservation)
    if found.mode is None:
        return f"tpu-sft:reservation: {s.reservation} not checked ({found.reason}); the VM's creation will tell"
    if found.mode == compute_reservation.MISSING:
        owner, name = compute_reservation.where(s.project, s.zone, s.reservation)
        raise ConfigError(
            stack_key("reservation"),
            f"Compute Engine has no reservation {name} in project {owner}, zone {s.zone}",
            f"`gcloud compute reservations list --project={owner}` names yours and its zone; "
            f"{set_hint('reservation', '<name>')} or pulumi config set gcp:zone <its zone>",
        )
    if found.mode not in MODE_WORDS:
        return f"tpu-sft:reservation: {s.reservation} is in mode {found.mode}, which tpu-sft does not know; not checked"
    needed = NEEDED_MODE[s.provisioning_model]
    if found.mode != needed:
        other = next(model for model, mode in NEEDED_MODE.items() if mode == found.mode)
        raise ConfigError(
            stack_key("provisioningModel"),
            f"is {s.provisioning_model}, which consumes {MODE_WORDS[needed]}, but {s.reservation} is "
            f"{MODE_WORDS[found.mode]}",
            set_hint("provisioningModel", other),
        )
    return None


def check(s: Settings, environ: Mapping[str, str]) -> tuple[str, ...]:
    """Both checks; the lines of those that could not ask."""
    return tuple(line for line in (gated_model(s, environ), reservation_mode(s)) if line)
