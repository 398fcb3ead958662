# driftwatch: one command on a session channel of its own, for a target without the python3
# the agent needs (agent.py does the same in Python). POSIX sh, plus GNU `timeout`, run
# with its arguments set (channel.py: `set -- SCRIPT SECONDS KILL_AFTER MARK`, then this).
# stdin starts with blank lines and MARK, for a profile that reads stdin to take instead of
# the command's input: what is left of them is skipped. stdout starts with MARK: what a
# profile printed comes before it, and without it the client knows the command never ran.
# `timeout` puts the command in a process group of its own (its pid) and sends SIGTERM to
# all of it at the deadline, but SIGKILL only while its own child lives: a script that dies
# on SIGTERM leaves its background jobs behind, and those that ignore SIGTERM would live
# on. So whatever is left of that group when `timeout` returns gets SIGTERM, and SIGKILL
# KILL_AFTER seconds later. What is still alive after that (D state: nobody can kill it)
# is listed on stderr, one "MARK PID STATE NAME" line each, from /proc.
script=$1 seconds=$2 grace=$3 mark=$4

live() {  # "PID STATE NAME" of each live process (not a zombie) in process group $1
  for f in /proc/[0-9]*/stat; do
    read -r s 2>/dev/null <"$f" || continue
    r=${s##*) }
    n=${s#*\(}
    set -f; set -- "$1" $r; set +f  # $2 state, $4 process group
    [ "$4" = "$1" ] && [ "$2" != Z ] && [ "$2" != X ] && echo "${s%% *} $2 ${n%\) *}"
  done
}

found=
while IFS= read -r line; do
  [ "$line" = "$mark" ] && { found=1; break; }
done
if [ -z "$found" ]; then
  echo "driftwatch: the login shell's profile read the command's input (stdin)" >&2
  exit 125
fi
printf '%s\n' "$mark"

if ! command -v timeout >/dev/null 2>&1; then
  echo "driftwatch: no \`timeout\` on this host to bound the command (without python3 for the agent)" >&2
  exit 127
fi
exec 3<&0  # a background job's stdin would be /dev/null
timeout -k "$grace" "$seconds" sh -c "$script" 0<&3 3<&- &
group=$!
exec 3<&- </dev/null
wait "$group"
rc=$?
if kill -0 -"$group" 2>/dev/null; then  # something of it is left (or only zombies)
  if [ "$rc" != 137 ]; then  # 137: timeout has sent SIGKILL to the group already
    kill -TERM -"$group" 2>/dev/null
    i=$((grace * 10))
    while [ "$i" -gt 0 ] && kill -0 -"$group" 2>/dev/null; do
      sleep 0.1
      i=$((i - 1))
    done
  fi
  if kill -0 -"$group" 2>/dev/null; then
    kill -KILL -"$group" 2>/dev/null
    sleep 0.3
    live "$group" | while read -r line; do echo "$mark $line" >&2; done
  fi
fi
exit "$rc"
