"""The embedded emulator: moto in-process plus TrainGrid's adaptation layer.

Each adaptation is one module that says why it exists and for which moto version; they are
applied together by :mod:`traingrid_local.emulator.session`.
"""
