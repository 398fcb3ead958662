"""What the target's login shell is given: one line that any shell passes to ``sh`` unchanged.

sshd runs every command as ``$SHELL -c COMMAND``, and the user's shell may be anything:
bash, dash, zsh, fish, tcsh or csh. csh and tcsh refuse a quoted string that spans lines
(``Unmatched '''``) and a word over ~8 KB (``Word too long``), fish has its own quoting,
and a profile may print before the command starts or read the command's input. So the
script travels base64-encoded, in words short enough for csh, after a line that only
decodes them and hands the result to ``sh``: ``A-Za-z0-9+/=`` and that one line mean the
same to every shell. The profile's output and its reads of stdin are the other end's
business: see the agent's hello (agent.py) and the channel's start marker (channel.py).
"""

from __future__ import annotations

import base64

# csh refuses words longer than about 8 KB ("Word too long"): the payload is cut well below.
WORD = 4000
# What every command line starts with: `sh` joins the words, decodes them and runs the script.
_DECODE = "exec sh -c 'eval \"$(printf %s \"$@\" | base64 -d)\"' sh"
# Blank lines sent ahead of a command's input, for a profile that reads stdin (`read line`)
# to take instead of it; the agent ignores blank lines, a channel's wrapper skips them.
PROFILE_LINES = 8


def login_command(script: str) -> str:
    """The one-line command that runs the POSIX sh ``script`` under any login shell (the
    script's own positional parameters are its business: ``set --`` sets them)."""
    payload = base64.b64encode(script.encode("utf-8")).decode("ascii")
    words = [payload[at : at + WORD] for at in range(0, len(payload), WORD)]
    return " ".join([_DECODE, *words])
