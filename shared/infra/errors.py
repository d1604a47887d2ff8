"""The one error the infrastructure commands raise for problems a human must fix."""


class InfraError(RuntimeError):
    """Missing tool, busy port, crashed process: the message says what to do.

    The CLI prints the message as one line and exits non-zero; retrying without a change
    will fail the same way.
    """
