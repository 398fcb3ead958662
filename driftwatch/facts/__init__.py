"""Reading a snapshot's facts: the layer every judgement reads through.

``diff/`` compares two snapshots, ``rules/`` judges one, ``fleet/`` and ``report/`` present
them; all of them read facts the same way (``read``), format values the same way (``fmt``),
name things the same way (``names``) and know what a server was launched with (``launch``).
Nothing here imports ``diff/``, ``rules/`` or ``explain/``: this is the bottom they share.
"""
