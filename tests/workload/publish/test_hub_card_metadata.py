"""The Hub stand-in refuses a model card's metadata as the Hub does: a `datasets` (or `base_model`) entry that is no
Hub repo id, such as a gs:// path or a local file, gets the Hub's 400 from `/api/validate-yaml`, which
huggingface_hub's create_commit asks before it uploads anything; so does a `model-index` without the fields the
Hub's spec requires. The rule, its sources and their dates:
tests/hub_upload_standin.py."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import replace

import pytest
import yaml

from tests.hub_upload_standin import HubStandin
from tests.workload.eval.reports import comparisons
from workload.publish.model_card import model_index

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


def test_a_result_on_part_of_a_task_or_on_the_rehearsals_fixture_says_so():
    whole, part = comparisons()[0], replace(comparisons()[0], n=100)
    named = [r["dataset"] for r in model_index((whole, part), "m", None)[0]["results"]]
    assert named[0]["type"] == named[1]["type"] and named[1]["name"] == named[0]["name"] + f" (100 of {whole.n})"
    (fixture,) = model_index((part,), "m", None, fixtures=True)[0]["results"]
    assert fixture["dataset"]["type"] != named[0]["type"] and fixture["dataset"]["name"].endswith("-format fixture")


def test_the_cards_model_index_is_accepted():
    """The eval's scores as model_card.py writes them: the fine-tune's and the base's on each task's Hub dataset."""
    index = model_index(comparisons(), "team/gemma-sft", "google/gemma-3-4b-it")
    with HubStandin(token=TOKEN) as hub:
        assert validate(hub, yaml.safe_dump({"license": "gemma", "model-index": index})) == (200, {"warnings": []})


MALFORMED_INDEX = [
    ({"model-index": {"name": "x"}}, '"model-index" must be a list of {name, results}'),
    ({"drop": "dataset.name"}, '"model-index[0].results[0].dataset.name" is required'),
    ({"drop": "task.type"}, '"model-index[0].results[0].task.type" is required'),
    ({"dataset.type": "gs://acme/evals/gsm8k"}, '"model-index[0].results[0].dataset.type" with value "gs://acme/'),
    ({"metrics": []}, '"model-index[0].results[0].metrics" with value [] is not valid'),
    ({"metrics": [{"type": "exact_match"}]}, '"model-index[0].results[0].metrics[0].value" is required'),
    ({"metrics": [{"type": "exact_match", "value": True}]}, '"model-index[0].results[0].metrics[0].value" with value'),
    ({"drop": "name"}, '"model-index[0].name" is required'),
]


@pytest.mark.parametrize(("change", "message"), MALFORMED_INDEX, ids=[m for _, m in MALFORMED_INDEX])
def test_a_model_index_missing_what_the_spec_requires_is_refused(change, message):
    index = model_index(comparisons()[:1], "team/gemma-sft", "google/gemma-3-4b-it")
    result = index[0]["results"][0]
    if "drop" in change:
        *parents, key = change["drop"].split(".")
        holder = index[0] if key == "name" and not parents else result
        for part in parents:
            holder = holder[part]
        del holder[key]
    elif "dataset.type" in change:
        result["dataset"]["type"] = change["dataset.type"]
    elif "metrics" in change:
        result["metrics"] = change["metrics"]
    metadata = {"license": "gemma", "model-index": change.get("model-index", index)}
    with HubStandin(token=TOKEN) as hub:
        code, answer = validate(hub, yaml.safe_dump(metadata))
    assert code == 400
    assert [e["message"] for e in answer["errors"] if e["message"].startswith(message)], answer
