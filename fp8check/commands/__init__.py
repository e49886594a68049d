"""One module per ``fp8check`` subcommand (see :mod:`fp8check.cli`)."""
