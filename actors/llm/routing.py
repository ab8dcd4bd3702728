"""Label-based model routing (seed 003 §11.1): which models may see data of a given label.

public and internal data may go to any model of the chain; sensitive and regulated data only
to models running on this machine (`models.local`, then the chain's models whose provider is in
`models.local_providers`); secret data to none. When nothing may take it the turn is refused
with a sentence saying how to configure a local model, rather than leaking it.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import labels


@dataclass(frozen=True)
class Routed:
    """The models a request may use, or why it may use none."""

    chain: list[str]
    refusal: str = ""
    local_only: bool = False


def route(label: str, chain: list[str], local: str, local_providers: list[str]) -> Routed:
    """Filter `chain` for data labelled `label`."""
    if labels.rank(label) >= labels.rank(labels.SECRET):
        return Routed([], "This conversation carries data labelled secret, which is never sent "
                          "to any language model, so it was not answered.")
    if not labels.local_only(label):
        return Routed(chain)
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
