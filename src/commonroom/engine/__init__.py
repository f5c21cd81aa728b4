"""The rules of a room: no trio, no HTTP, no clock of its own (see docs/architecture.md).

Everything above the engine goes through `engine.facade`; the feature modules
behind it are the engine's own (the import-linter contracts hold both).
"""
