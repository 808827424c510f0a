"""The one base class for errors a user can cause and fix: the CLI prints them as one sentence."""


class UserError(ValueError):
    """Bad input, a missing file or backend, an invalid task or candidate. The message names the fix."""
