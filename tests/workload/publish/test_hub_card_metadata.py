"""The Hub stand-in refuses a model card's metadata as the Hub does: a `datasets` (or `base_model`) entry that is no
Hub repo id, such as a gs:// path or a local file, gets the Hub's 400 from `/api/validate-yaml`, which
huggingface_hub's create_commit asks before it uploads anything. The rule, its sources and their dates:
tests/hub_upload_standin.py."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.hub_upload_standin import HubStandin

TOKEN = "hf_" + "St4ndInT0ken" * 3


def validate(hub: HubStandin, metadata: str) -> tuple[int, dict]:
    content = f"---\n{metadata}\n---\n\n# a card\n"
    request = urllib.request.Request(
        f"{hub.endpoint}/api/validate-yaml",
        data=json.dumps({"content": content, "repoType": "model"}).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.mark.parametrize(
    "entry",
    ["gs://acme-private/data/5f0c1e/chats.jsonl", "/var/hf/images/", "./chats.jsonl", "a/b/c", "foo--bar", "x.git"],
)
def test_a_dataset_entry_that_is_no_hub_id_is_refused(entry):
    with HubStandin(token=TOKEN) as hub:
        code, answer = validate(hub, f"license: gemma\ndatasets:\n- {json.dumps(entry)}")
    assert code == 400
    assert answer["errors"] == [
        {
            "message": f'"datasets[0]" with value "{entry}" is not valid. '
            "If possible, use a dataset id from https://hf.co/datasets."
        }
    ]


def test_hub_ids_are_accepted_and_a_base_model_path_is_refused():
    with HubStandin(token=TOKEN) as hub:
        ok = "license: gemma\nbase_model: google/gemma-3-4b-it\ndatasets:\n- HuggingFaceH4/ultrachat_200k\n- squad"
        assert validate(hub, ok) == (200, {"warnings": []})
        code, answer = validate(hub, "license: gemma\nbase_model: /home/me/model")
    assert code == 400 and answer["errors"][0]["message"].startswith('"base_model[0]" with value "/home/me/model"')


def test_a_refused_card_is_one_line_with_the_hubs_reasons():
    from workload.publish.__main__ import _one_line

    refused = ValueError(
        'Invalid metadata in README.md.\n- "datasets[0]" with value "gs://b/x.jsonl" is not valid. If possible, use a '
        "dataset id from https://hf.co/datasets."
    )
    assert _one_line(refused) == (
        'the Hub refused the model card\'s metadata (- "datasets[0]" with value "gs://b/x.jsonl" is not valid. '
        "If possible, use a dataset id from https://hf.co/datasets.); report it with the kept manifest.json"
    )
    assert _one_line(ConnectionError("reset\ntraceback detail")) == "ConnectionError: reset"
