"""`wintermute replay`: recorded turns from JetStream history (or an exported file), re-driven
through a real planner process on a scratch prefix and compared with the recording."""

from supervisor.cli.replay.command import Options, replay, rerun_turns
from supervisor.cli.replay.record import Recording, Turn
from supervisor.cli.replay.timeline import timeline

__all__ = ["Options", "Recording", "Turn", "replay", "rerun_turns", "timeline"]
