"""The rulebook: known-bad states in one snapshot, each with its fix and public reference.

Pure, like ``diff/``: rules read snapshot facts only (no I/O, no printing). ``doctor``
applies them to one snapshot; ``diff``, ``check`` and ``fleet`` apply them to each side and
say which change produced a known-bad state. One module per class of rule, one registry
(``registry.RULES``, run by ``registry.diagnose``); known-bad version ranges are data
(``known_bad.toml``, extended by the config's ``[[rules]]``).

Rules read facts through ``driftwatch.facts`` and never import ``diff/`` or ``explain/``;
``explain/`` ties their findings to the diff's changes.
"""
