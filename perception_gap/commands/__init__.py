"""The command line's commands: one module per command, each with the text it prints.

`cli.py` parses argv and dispatches here; `<module>.execute(args)` runs one command against
the library, writes its output files atomically, prints its summary (unless `--quiet`) and
returns the exit code (0 ok, 1 a gate failed, 2 bad input: one line on stderr through
`output.fail`). This folder and `cli.py` are the only code that prints; everything below them
returns results and logs.
"""
