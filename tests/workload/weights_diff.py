"""Compares the text weights of two Hugging Face Gemma 3 directories, bit for bit, whatever each file
names its tensors (transformers maps both layouts onto the same modules). Runs in the MaxText venv:

    python weights_diff.py DIR_A DIR_B   →   {"identical": [...], "different": [...], "only_a": [...], "only_b": [...]}
"""

import json
import sys

import torch
from transformers import AutoModelForImageTextToText


def text_weights(path):
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.bfloat16)
    return {name: p.detach() for name, p in model.named_parameters() if "language_model" in name}


def main(a_dir, b_dir):
    a, b = text_weights(a_dir), text_weights(b_dir)
    shared = sorted(set(a) & set(b))
    result = {
        "identical": [n for n in shared if torch.equal(a[n], b[n])],
        "different": [n for n in shared if not torch.equal(a[n], b[n])],
        "only_a": sorted(set(a) - set(b)),
        "only_b": sorted(set(b) - set(a)),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:3])
