"""commonroom: a temporary room around a markdown file, for people and their agents."""

__version__ = "0.1.0"
PROTOCOL_NAME = "commonroom"
PROTOCOL_VERSION = "1"
