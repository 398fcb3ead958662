#!/bin/sh
# driftwatch-healthcheck: drain a Slurm node that drifted from its known-good state.
#
# Runs `driftwatch check local` against the node's "good" baseline. When the check
# fails (drift at or above FAIL_ON) the node is drained with driftwatch's one-line
# reason, `ERROR: driftwatch: <most likely cause>`; when a later check is clean the
# node is resumed, but only while that reason is still driftwatch's: a node someone
# else drained (an administrator, another health check) is never resumed or relabelled.
#
# slurm.conf (the same program serves both; slurmd gives it no arguments):
#   HealthCheckProgram=/usr/local/sbin/driftwatch-healthcheck
#   HealthCheckInterval=300
#   HealthCheckNodeState=ANY
#   Prolog=/usr/local/sbin/driftwatch-healthcheck      # optional: check before each job
#
# Settings live in a shell fragment, /etc/default/driftwatch-healthcheck (or the file
# named by DRIFTWATCH_HEALTHCHECK_CONF): slurmd runs this with almost no environment.
#   DRIFTWATCH=/opt/driftwatch/bin/driftwatch
#   DRIFTWATCH_ARGS="--config /etc/driftwatch/config.toml --textfile /var/lib/prometheus/node-exporter"
#   BASELINE=good       # the label of the node's known-good snapshot
#   FAIL_ON=high        # drift below this severity never drains
#   DEADLINE=30         # seconds for the whole check; Slurm kills a health check at 60
#   DRAIN_ON_ERROR=0    # 1: also drain when the check cannot run (no baseline, store down)
#   PROLOG_REJECTS=1    # in the Prolog, a failed check also fails the job's start there
#
# Exit status: 0, except in the Prolog when it drained the node and PROLOG_REJECTS=1
# (Slurm then requeues the job elsewhere). Everything it does is logged to syslog
# (tag driftwatch-healthcheck) and stderr.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
export PATH
conf=${DRIFTWATCH_HEALTHCHECK_CONF:-/etc/default/driftwatch-healthcheck}
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"

DRIFTWATCH=${DRIFTWATCH:-driftwatch}
BASELINE=${BASELINE:-good}
FAIL_ON=${FAIL_ON:-high}
DEADLINE=${DEADLINE:-30}
DRAIN_ON_ERROR=${DRAIN_ON_ERROR:-0}
PROLOG_REJECTS=${PROLOG_REJECTS:-1}
NODE=${SLURMD_NODENAME:-$(hostname -s)}
PREFIX="ERROR: driftwatch:"

log() {
  echo "driftwatch-healthcheck: $NODE: $*" >&2
  logger -t driftwatch-healthcheck -- "$NODE: $*" 2>/dev/null || true
}

# The node's current drain/down reason ("none" when it has none), from slurmctld.
current_reason() {
  timeout 10 sinfo --noheader --Node --nodes="$NODE" --format='%E' 2>/dev/null | head -n 1
}

drain() {
  reason=$1
  was=$(current_reason)
  case $was in
    "$reason") return 0 ;;                        # already drained for this very reason
    "" | none | "$PREFIX"*) ;;                    # free, or drained by us for another drift
    *) log "not drained: it already has another reason: $was"; return 0 ;;
  esac
  if timeout 10 scontrol update nodename="$NODE" state=drain reason="$reason"; then
    log "drained: $reason"
  else
    log "could not drain the node (scontrol failed): $reason"
  fi
}

resume() {
  was=$(current_reason)
  case $was in
    "$PREFIX"*)
      if timeout 10 scontrol update nodename="$NODE" state=resume; then
        log "resumed: the check is clean again (was: $was)"
      else
        log "could not resume the node (scontrol failed)"
      fi ;;
  esac
}

# driftwatch bounds itself (--deadline); the timeout around it is for an interpreter that
# cannot even start (a hung filesystem under its installation).
# shellcheck disable=SC2086
line=$(timeout -k 5 $((DEADLINE + 10)) "$DRIFTWATCH" check local --baseline "$BASELINE" \
  --fail-on "$FAIL_ON" --deadline "$DEADLINE" --nhc $DRIFTWATCH_ARGS)
rc=$?
line=$(printf '%s\n' "$line" | head -n 1)

failed=0
case $rc in
  0) resume ;;
  2) failed=1; drain "${line:-$PREFIX drift at or above $FAIL_ON}" ;;
  *)
    reason=${line:-"$PREFIX could not check (exit $rc)"}
    if [ "$DRAIN_ON_ERROR" = 1 ]; then
      failed=1; drain "$reason"
    else
      log "check did not run, node left as it is: $reason"
    fi ;;
esac

# In the Prolog (slurmd sets SLURM_JOB_ID), a failed check also refuses this job.
if [ "$failed" = 1 ] && [ -n "${SLURM_JOB_ID:-}" ] && [ "$PROLOG_REJECTS" = 1 ]; then
  exit 1
fi
exit 0
