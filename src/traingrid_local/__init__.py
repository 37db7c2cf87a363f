"""Local-only TrainGrid: the embedded emulator, the demo and the ``traingrid`` CLI.

Never shipped in the Lambda layer.
"""
