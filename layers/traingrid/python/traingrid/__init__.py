"""TrainGrid's shared runtime: domain logic, typed boundaries and AWS adapters.

This package is the Lambda layer. It stays small and imports fast: it never imports the
emulator or the CLI, and only ``traingrid.db`` and the planner import SQLAlchemy, so only the
functions that use the campaign database load it.
"""

__version__ = "0.1.0"
