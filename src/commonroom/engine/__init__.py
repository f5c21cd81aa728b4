"""The rules of a room, sans-I/O: no trio, no HTTP, time from an injected clock.

Public surface: `Engine` (core.py), the operation table (operations.py), the
records (records.py) and the region scanner (regions.py).
"""
