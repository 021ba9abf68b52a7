"""The one error the commands raise: its message is the sentence the user reads."""

from __future__ import annotations


class CliError(Exception):
    """Something the command cannot do; `str(error)` says what and how to fix it. The command
    prints it and exits with status 1, without a traceback."""
