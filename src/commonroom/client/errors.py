"""The client's exceptions, as the library names them (`commonroom.StaleVersion`, ...).

They are defined in `commonroom.wire.errors`, the layer that raises them; this module is their
public import path and re-exports every name of its `__all__`
(`from commonroom.client.errors import StaleVersion`), so the list is written once, there.
"""

from __future__ import annotations

from commonroom.wire.errors import *  # noqa: F403
from commonroom.wire.errors import __all__ as __all__
