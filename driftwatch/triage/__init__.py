"""Living with drift: changes a person accepted or a team ignores are shown, never drift.

- ``patterns``: which changes a typed pattern names (``accept``/``[[ignore]]``) or mentions
  (``history --item``).
- ``ignore``: ``[[ignore]]`` rules from the config, and marking the changes they name.
- ``accept``: acceptances per host and baseline, and marking the changes they cover, or
  saying why a change counts again ("changed again since accepted", "acceptance expired").
- ``apply``: both laid over a diff (``DiffResult``) or a fleet comparison.
- ``book``: where acceptances are kept (the store's per-host state); the only I/O here.

The diff core (``driftwatch.diff``) knows nothing of this; commands load the rules and
acceptances and pass them in, with the time to judge expiry by.
"""
