"""The vocabulary of protocol 1, with no I/O.

Everything else in the project imports from here; this package imports
nothing of the project.
"""
