"""Label-based model routing (seed 003 §11.1): which models may see data of a given label.

public and internal data may go to any model of the chain; sensitive and regulated data only
to models running on this machine (`models.local`, then the chain's models whose provider is in
`models.local_providers`), except sensitive data of a principal the owner listed in
`privacy.owner_acknowledged_cloud_risk` (seed 003 §11.1's opt-in; regulated data never);
secret data to none. When nothing may take it the turn is refused
with a sentence saying how to configure a local model, rather than leaking it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from contracts import labels


@dataclass(frozen=True)
class Routed:
    """The models a request may use, or why it may use none."""

    chain: list[str]
    refusal: str = ""
    local_only: bool = False
    acknowledged: bool = False  # sensitive data sent to the whole chain by the owner's leave


def acknowledged(principal: str, patterns: list[str]) -> bool:
    """Whether the owner acknowledged the cloud risk for this principal's data
    (privacy.owner_acknowledged_cloud_risk: principals or glob patterns)."""
    return bool(principal) and any(fnmatch.fnmatchcase(principal, p) for p in patterns if p)


def route(label: str, chain: list[str], local: str, local_providers: list[str],
          cloud_ok: bool = False) -> Routed:
    """Filter `chain` for data labelled `label`; `cloud_ok` (the owner acknowledged the
    cloud risk for this turn's principal) lets `sensitive`, and only sensitive, data go to
    every model of the chain."""
    if labels.rank(label) >= labels.rank(labels.SECRET):
        return Routed([], "This conversation carries data labelled secret, which is never sent "
                          "to any language model, so it was not answered.")
    if not labels.local_only(label):
        return Routed(chain)
    if cloud_ok and label == labels.SENSITIVE:
        return Routed(chain, acknowledged=True)
    local_chain = [local] if local else []
    local_chain += [m for m in chain
                    if m.partition("/")[0] in local_providers and m not in local_chain]
    if not local_chain:
        return Routed([], (
            f"This conversation carries data labelled {label}, which may only go to a model "
            "running on this machine, and none is configured, so it was not sent anywhere. "
            'Set [models] local = "ollama/llama3.2" (with Ollama running) in config.toml, '
            "then ask again."), local_only=True)
    return Routed(local_chain, local_only=True)
