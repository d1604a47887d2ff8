"""intentledger: the command line, the demo and the fault-protocol runner that ship with the
services (``services/``), the reference downstreams (``downstreams/``) and the libraries they
share (``shared/``)."""

__version__ = "0.2.0.dev0"
"""The release; the package's version is read from here (pyproject.toml), and the public
contract's versioning rules are in schemas/README.md."""
