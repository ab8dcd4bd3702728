"""Typed accessors of shared KV state (budget counters, Flatline holds) over the bus API."""
