"""The `wintermute` command line: chat, status, tap, replay, tools, holds."""
