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
import os
from pathlib import Path

LFS_SUFFIXES = (".safetensors", ".bin", ".model", ".gguf")


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
