#!/bin/sh
# Install driftwatch into a private virtualenv and put `driftwatch` on PATH.
#
# System Pythons (Debian 12, Ubuntu 24.04) refuse `pip install` outside a virtualenv
# (PEP 668: externally-managed-environment), so driftwatch gets one of its own:
#   DRIFTWATCH_HOME  where the virtualenv goes   (default ~/.local/share/driftwatch)
#   DRIFTWATCH_BIN   where the `driftwatch` link goes (default ~/.local/bin)
#   PYTHON           the interpreter to build it on (default python3; 3.10 or newer)
#   DRIFTWATCH_EXTRAS optional extras, e.g. s3 for an s3:// store (fsspec, s3fs)
# Run it again to upgrade in place.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
home=${DRIFTWATCH_HOME:-"$HOME/.local/share/driftwatch"}
bin=${DRIFTWATCH_BIN:-"$HOME/.local/bin"}
python=${PYTHON:-python3}

if ! command -v "$python" >/dev/null 2>&1; then
  echo "install.sh: $python not found; install Python 3.10 or newer (apt-get install python3)" >&2
  exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "install.sh: driftwatch needs Python 3.10 or newer; $python is $("$python" -V 2>&1)" >&2
  exit 1
fi
if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  echo "install.sh: $python cannot make virtualenvs; install its venv module (apt-get install python3-venv)" >&2
  exit 1
fi

"$python" -m venv "$home/venv"
spec=$here
[ -n "${DRIFTWATCH_EXTRAS:-}" ] && spec="$here[$DRIFTWATCH_EXTRAS]"
"$home/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
mkdir -p "$bin"
ln -sf "$home/venv/bin/driftwatch" "$bin/driftwatch"
echo "installed $("$bin/driftwatch" --version) as $bin/driftwatch"
case ":$PATH:" in
  *":$bin:"*) ;;
  *) echo "note: $bin is not on your PATH; add it, or run $bin/driftwatch" >&2 ;;
esac
