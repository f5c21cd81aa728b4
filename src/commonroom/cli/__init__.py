"""`ce`, the command-line client, and the byte client behind it (`byteclient`)."""
