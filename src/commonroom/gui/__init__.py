"""The host's page: static files served by the owner listener (http/owner.py)."""
