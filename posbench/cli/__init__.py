"""Command-line programs: one module per ``python -m posbench`` command."""
