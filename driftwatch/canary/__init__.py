"""The output canary: fixed greedy prompts sent to a running server, answers recorded and compared.

``settings`` (the config's ``[canary]``), ``prompts`` (what is sent, every sampling
parameter explicit), ``parse`` (the server's answers into facts) and ``classify`` (two
answers to one prompt: identical, a near-tie flip, changed, a moved template/tokenizer, or a
noisy server) are pure. The probe that sends them is ``probes/canary.py``; the diff rules
``diff/canary.py``; the command ``commands/canary.py``.
"""
