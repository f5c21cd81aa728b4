"""`ce`, the command-line client (its byte client is `commonroom.wire`)."""
