"""User-facing errors: one clear line, exit code 2, no traceback."""


class PerfkitError(ValueError):
    """Bad input from the user (profile, option, file). The CLI prints it and exits 2."""

    exit_code = 2
