"""Which embedding model made the stored vectors, whether it may be used right now, and what
`status` should say when it may not (store.py asks before every vector it needs)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import msgspec

from actors.memory.embedding import Embedder, EmbeddingUnavailable

log = logging.getLogger(__name__)

RETRY_SECS = 60  # a failing embedding model is tried again after this long


class Meta(msgspec.Struct, frozen=True):
    """embedding.json beside the table: the model that made the stored vectors."""

    model: str = ""
    dim: int = 0


class Vectors:
    """The embedding model of one store and its state, recorded in `embedding.json`."""

    def __init__(self, meta: Path, embedder: Embedder | None) -> None:
        self.meta, self.embedder = meta, embedder
        self.model = self._recorded()  # the model that made the stored vectors ("": none yet)
        self.problem = "" if embedder else "no embedding model ([models] embedding = none)"
        self.failure = ""  # the model failed: tried again after RETRY_SECS
        self.retry_at = 0.0
        self.unembedded = 0  # active memories without a vector (the store counts them)
        if embedder and self.model and self.model != embedder.name:
            self.problem = (f"stored vectors are from {self.model}, not {embedder.name}: "
                            "full-text search only until `wintermute memory reembed`")

    def _recorded(self) -> str:
        try:
            return msgspec.json.decode(self.meta.read_bytes(), type=Meta).model
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return ""

    def record(self, dim: int) -> None:
        """The stored vectors are now the current model's."""
        assert self.embedder is not None
        self.meta.write_bytes(msgspec.json.encode(Meta(model=self.embedder.name, dim=dim)))
        self.model = self.embedder.name
        self.problem = self.failure = ""

    def clear(self) -> None:
        """The stored vectors are gone (re-embedding starts)."""
        self.meta.unlink(missing_ok=True)
        self.model = ""
        self.problem = self.failure = ""

    @property
    def warning(self) -> str:
        return self.problem or self.failure

    @property
    def usable(self) -> bool:
        """A model that made the stored vectors and has not failed in the last RETRY_SECS."""
        if self.embedder is None or self.problem:
            return False
        return not self.failure or time.monotonic() >= self.retry_at

    def embed(self, texts: list[str]) -> list[list[float]] | None:
        """Vectors for `texts`, or None (and a warning) when the model cannot make them."""
        if self.embedder is None or not self.usable:
            return None
        try:
            vectors = self.embedder.embed(texts)
        except EmbeddingUnavailable as exc:
            self.failure = f"{exc}; full-text search only (tried again every {RETRY_SECS} s)"
            self.retry_at = time.monotonic() + RETRY_SECS
            log.warning("memory store: %s", self.failure)
            return None
        self.failure = ""
        return vectors

    def note(self) -> str:
        """The warning for `status`: full-text only, or memories that lack vectors."""
        if self.warning:
            return self.warning
        if self.unembedded:
            return (f"{self.unembedded} memories have no vector (saved before vectors, or while "
                    "the model failed) and are found by full text only: `wintermute memory "
                    "reembed`")
        return ""
