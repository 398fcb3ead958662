from driftwatch.cli import run

run()
