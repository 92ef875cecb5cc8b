"""The tiny profile's tokenizer: Gemma 3's own, cut to the tiny model's vocabulary (workload/tiny/assets.py
build_tokenizer). Checked against the SentencePiece file it is cut from, as MaxText ships it."""

from __future__ import annotations

import json
import subprocess

from tests.workload.tiny_run import REPO
from workload.tiny import assets

COMPARE = r"""
import json, sys
import sentencepiece
from transformers import AutoTokenizer
from workload.tiny import assets

cut = AutoTokenizer.from_pretrained(sys.argv[1])
gemma = sentencepiece.SentencePieceProcessor(model_file=assets.gemma_tokenizer_file())
marks = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"]
text = sys.argv[2]
print(json.dumps({
    "size": len(cut),
    "cut_ids": cut.convert_tokens_to_ids(marks),
    "gemma_ids": [gemma.piece_to_id(mark) for mark in marks],
    "cut_pieces": cut.tokenize(text),
    "gemma_pieces": gemma.encode(text, out_type=str),
}))
"""
TEXT = "Tell me something about rivers, number 3. Glaciers carve valleys; bees make honey!"


def test_the_tiny_tokenizer_keeps_gemmas_ids_and_spells_words_in_pieces_not_bytes(maxtext_python, tiny_converted):
    model = tiny_converted / "tiny" / assets.MODEL_SUBDIR
    done = subprocess.run([maxtext_python, "-c", COMPARE, str(model), TEXT], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["size"] == assets.SPEC["vocab_size"]
    assert seen["cut_ids"] == seen["gemma_ids"]  # the chat template's marks are the ids Gemma 3 gives them
    assert not [piece for piece in seen["cut_pieces"] if piece.startswith("<0x")]  # no byte fallback for English
    assert len(seen["cut_pieces"]) <= 2 * len(seen["gemma_pieces"])
