"""TrainGrid's shared runtime: domain logic, typed boundaries and AWS adapters.

This package is the Lambda layer. It stays small and imports fast: nothing here imports
SQLAlchemy, the emulator or the CLI.
"""

__version__ = "0.1.0"
