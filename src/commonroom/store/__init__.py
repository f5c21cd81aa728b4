"""SQLite sidecar: schema, migrations, version storage, the event ring. Knows SQL, not HTTP."""
