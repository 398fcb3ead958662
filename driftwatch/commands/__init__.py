"""One module per command; each returns the process exit code."""
