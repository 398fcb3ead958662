"""A Hugging Face hub cache written the way huggingface_hub's ``hf_hub_download`` writes it.

``<cache>/models--ORG--NAME/`` holds ``blobs/<etag>`` (the file's content; the etag is the
git blob sha1 of a regular file, the sha256 of an LFS file such as weights),
``refs/main`` (the commit it resolved, no newline, written to a temp file and renamed) and
``snapshots/<commit>/<filename>`` as a relative symlink ``../../blobs/<etag>`` (one more
``../`` per directory level of the filename). The cache root gets a ``CACHEDIR.TAG``.
See huggingface_hub ``file_download.py``: ``_create_symlink``,
``_cache_commit_hash_for_specific_revision``, ``repo_folder_name``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

LFS_SUFFIXES = (".safetensors", ".bin", ".model", ".gguf")

# A Qwen3-like model's files, small: what the hub serves for one revision.
GENERATION = {"bos_token_id": 151643, "eos_token_id": [151645, 151643], "temperature": 0.6, "top_p": 0.95,
              "do_sample": True, "transformers_version": "4.51.0"}
CONFIG = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 36,
          "rope_scaling": None, "torch_dtype": "bfloat16", "max_position_embeddings": 40960}
TEMPLATE = "{%- for message in messages %}{{ message.content }}{%- endfor %}" * 20


def model_files(generation: dict[str, Any] | None = None) -> dict[str, bytes]:
    return {
        "config.json": json.dumps(CONFIG).encode(),
        "generation_config.json": json.dumps(generation or GENERATION).encode(),
        "tokenizer_config.json": json.dumps({"eos_token": "<|im_end|>", "chat_template": TEMPLATE}).encode(),
        "tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE"}}',
        "model-00001-of-00002.safetensors": b"w" * 64,
        "model-00002-of-00002.safetensors": b"v" * 32,
        "model.safetensors.index.json": b'{"weight_map": {}}',
        "README.md": b"# Qwen3\n",
    }


def etag(name: str, data: bytes) -> str:
    if name.endswith(LFS_SUFFIXES):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def repo_dir(cache: Path, repo: str) -> Path:
    return cache / "--".join(["models", *repo.split("/")])


def write_revision(cache: Path, repo: str, files: dict[str, bytes], ref: str = "main") -> str:
    """Download ``files`` as one revision of ``repo`` and point ``refs/<ref>`` at it."""
    folder = repo_dir(cache, repo)
    commit = hashlib.sha1(repr(sorted(files.items())).encode()).hexdigest()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    for name, data in files.items():
        blob = folder / "blobs" / etag(name, data)
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            incomplete = blob.with_name(blob.name + ".incomplete")
            incomplete.write_bytes(data)
            os.replace(incomplete, blob)
        pointer = folder / "snapshots" / commit / name
        pointer.parent.mkdir(parents=True, exist_ok=True)
        if pointer.is_symlink():
            pointer.unlink()
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    ref_path = folder / "refs" / ref
    ref_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref_path.with_name(f"{ref}.{commit[:8]}.tmp")
    tmp.write_text(commit)
    os.replace(tmp, ref_path)
    return commit
