"""What every section of the configuration shares: the error that names a key, and the base
class that refuses unknown keys."""

from __future__ import annotations

import msgspec


class ConfigError(Exception):
    """A configuration value is missing or invalid; the message names the key."""


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass
