"""Breaks an exported model the way a converter silently can: one square weight written transposed (same
shape, same dtype, finite — transformers loads it and generates). Runs in the MaxText venv:

    python transpose_weight.py EXPORT_DIR NAME_SUFFIX   →   prints the tensor's full name
"""

import sys

from safetensors.torch import load_file, save_file


def main(export_dir, suffix):
    path = f"{export_dir}/model.safetensors"
    tensors = load_file(path)
    (name,) = [n for n in tensors if n.endswith(suffix)]
    weight = tensors[name]
    assert weight.shape[0] == weight.shape[1], f"{name} is not square: {tuple(weight.shape)}"
    tensors[name] = weight.T.contiguous()
    save_file(tensors, path, metadata={"format": "pt"})
    print(name)


if __name__ == "__main__":
    main(*sys.argv[1:])
