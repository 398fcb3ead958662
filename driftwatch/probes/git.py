"""Git facts per watched working tree: where HEAD is and what is uncommitted.

The digest of ``git diff HEAD`` is computed on the target, so an uncommitted diff of any
size costs one line of output, and "edited then reverted" (same digest, or clean again)
differs from "edited and left" (new digest).
"""

from __future__ import annotations

from driftwatch.probes.base import Facts, ProbeContext, ProbeSkipped
from driftwatch.probes.sections import first, parse_sections
from driftwatch.transport import quote_path

# safe.directory='*': a root cron job reading a repo owned by another user must not be
# refused as "dubious ownership"; we only read.
REPO_SCRIPT = r"""
g() { git -c safe.directory='*' -c core.quotepath=off -C "$p" "$@"; }
if ! top=$(g rev-parse --show-toplevel 2>&1); then echo "@@error $top" | head -n 1; exit 0; fi
echo "@@path $top"
echo "@@head $(g rev-parse -q --verify HEAD 2>/dev/null)"
echo "@@branch $(g symbolic-ref --short -q HEAD)"
echo "@@describe $(g describe --tags --always 2>/dev/null)"
echo "@@subject $(g log -1 --format=%s 2>/dev/null)"
echo "@@date $(g log -1 --format=%cI 2>/dev/null)"
# A status or diff that fails (a locked or damaged index, an unreadable file) says nothing
# about the tree: an error, never "clean".
if ! st=$(g status --porcelain=v1 --untracked-files=normal 2>&1); then
  echo "@@error git status failed: $(printf '%s\n' "$st" | tail -n 1)"; exit 0
fi
[ -z "$st" ] || printf '%s\n' "$st" | sed 's/^/@@dirty /'
base=HEAD
g rev-parse -q --verify HEAD >/dev/null || base=$(g hash-object -t tree /dev/null)  # no commit yet
# git diff's exit status leaves the pipeline on fd 3, beside the digest: no temp file, so a
# missing or full temp folder cannot pass for a failed diff.
r=$( { { g diff "$base" --no-ext-diff --binary 2>/dev/null; echo "rc=$?" >&3
         g ls-files --others --exclude-standard 2>/dev/null; } | sha256sum; } 3>&1 )
rc=${r#*rc=}; rc=${rc%%[!0-9]*}
[ "$rc" = 0 ] || { echo "@@error git diff failed (exit $rc)"; exit 0; }
for w in $r; do case $w in rc=*|-) ;; *) d=$w ;; esac; done
echo "@@diff_sha256 $d"
"""


def repo_script(path: str) -> str:
    return f"p={quote_path(path)}\n{REPO_SCRIPT}"


def parse_repo(text: str) -> Facts:
    sections = parse_sections(text)
    error = first(sections, "error")
    if error is not None:
        return {"error": error.strip()}
    dirty = sorted(line[3:] for line in sections.get("dirty", []) if len(line) > 3)
    return {
        "path": first(sections, "path"),
        "head": first(sections, "head"),
        "branch": first(sections, "branch"),
        "describe": first(sections, "describe"),
        "subject": first(sections, "subject"),
        "date": first(sections, "date"),
        "dirty": dirty,
        # A clean tree has no uncommitted diff to fingerprint.
        "diff_sha256": first(sections, "diff_sha256") if dirty else None,
        "error": None,
    }


class GitProbe:
    name = "git"

    def collect(self, ctx: ProbeContext) -> Facts:
        if not ctx.watch.repos:
            raise ProbeSkipped("no repos configured ([watch] repos)")
        repos: Facts = {}
        for path in ctx.watch.repos:
            result = ctx.run(repo_script(path))
            repos[path] = parse_repo(result.text)
            if not result.ok and repos[path].get("error") is None and not repos[path]["head"]:
                repos[path] = {"error": result.error_text or f"exit {result.exit_code}"}
        return {"repos": repos}
