"""The cron workflow, in the order a ``driftwatch check`` takes it.

1. ``commands/check.py`` snapshots the host under its lock (``SnapshotStore.lock``);
2. ``retention.save_deduplicated`` stores it, dropping the previous snapshot when nothing
   changed (``prune`` trims the rest);
3. the diff against the baseline decides drift (``driftwatch.diff``);
4. ``alerts.AlertState`` decides whether this is news (a new or different drift, or its
   resolution), and ``notify.send`` delivers it to webhooks or programs;
5. ``textfile.write_textfile`` leaves node_exporter's ``.prom`` for Prometheus.
"""
