"""The Python client: `Client` (blocking) and `AsyncClient` (trio). See `commonroom`'s exports."""
