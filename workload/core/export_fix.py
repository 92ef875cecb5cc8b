"""The one correction the export needs: MaxText's to_huggingface (0.2.2's, and 0.2.3's `hf_model_configs.py`
`gemma3_4b_config`) writes `"hidden_activation": "gelu"` for Gemma 3 (maxtext#2867, open); Gemma 3 is trained with
the tanh approximation, `gelu_pytorch_tanh`, which is what the Hub's own configs say. transformers would otherwise
run the exact GELU: a different model.
"""

from __future__ import annotations

import json
import os

KEY = "hidden_activation"
WRONG = "gelu"
RIGHT = "gelu_pytorch_tanh"
WHY = (
    "maxtext#2867: MaxText 0.2.3 to_huggingface writes hidden_activation=gelu for gemma3; Gemma 3 uses "
    "gelu_pytorch_tanh (as the Hub configs say), and transformers would otherwise compute exact GELU"
)


def fix_hidden_activation(config_path: str) -> list[dict]:
    """Rewrites the wrong value wherever it sits (top level or text_config); returns what changed."""
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    changes = []
    for scope, section in (("", config), ("text_config.", config.get("text_config"))):
        if isinstance(section, dict) and section.get(KEY) == WRONG:
            section[KEY] = RIGHT
            changes.append({"key": scope + KEY, "was": WRONG, "now": RIGHT, "why": WHY})
    if changes:
        tmp = f"{config_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, config_path)
    return changes
