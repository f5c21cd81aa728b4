"""HTTP adapter: the quart-trio app served by hypercorn's trio worker (see `serving`)."""
