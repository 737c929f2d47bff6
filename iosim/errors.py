"""The one error type users see: a one-line message; the CLI turns it into exit code 2."""


class IosimError(Exception):
    """A problem with the user's input or environment, explained in one line."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
