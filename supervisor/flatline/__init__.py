"""Flatline, the repair policy: tool quarantine rules, diagnosis, digests, scripts history."""
