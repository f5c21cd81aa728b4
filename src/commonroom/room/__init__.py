"""The trio layer: where trio meets the engine (docs/spec/PROTOCOL.md sections 8, 10).

- `core.Room`: runs engine operations on the one store thread, publishes
  their events after they commit, owns the sweeper and the file watcher;
- `hub.EventHub`: fans committed events out to bounded subscriber buffers;
- `streams`: observe (replay then live, resync, heartbeats, ends) and the
  long-poll, as transport-free items;
- `pumps`: every open stream is a task in the room's own nursery, feeding
  its adapter through a bounded channel, so stopping the room ends them all.
"""

from commonroom.room.core import Room

__all__ = ["Room"]
