"""What an agent-created tool is on disk: scripts/<name>.py plus scripts/<name>.json."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_DESCRIPTION = 200
DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600  # a tool may take longer than a shell command, but not forever


class ScriptSpec(msgspec.Struct, frozen=True, kw_only=True):
    """The schema file: what the model sees, plus the tool's time limit.

    Run statistics (_meta) are deliberately not kept here: this file is writable by the model,
    and the registry's numbers must not be.
    """

    name: str
    description: str
    parameters: dict[str, Any] = msgspec.field(default_factory=lambda: {"type": "object"})
    timeout_secs: int = DEFAULT_TIMEOUT


class SpecError(ValueError):
    """A tool name or schema file is not acceptable; the message is a sentence for the model."""


def check_name(name: object) -> str:
    """The name if it is a valid tool name (lowercase, digits, underscores; no paths)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise SpecError(
            f"The tool name {name!r} is not allowed: use 1-64 characters, lowercase letters, "
            "digits and underscores, starting with a letter (it becomes the file name)."
        )
    return name


def normalise_parameters(schema: object) -> dict[str, Any]:
    """A JSON Schema for an object of arguments; a bare properties map is wrapped."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema) if schema.strip() else {}
        except ValueError as exc:
            raise SpecError(f"parameters_schema is not valid JSON: {exc}.") from exc
    if not isinstance(schema, dict):
        raise SpecError("parameters_schema must be a JSON Schema object, e.g. "
                        '{"type": "object", "properties": {...}}.')
    if "type" not in schema and "properties" not in schema:
        # The seed's examples give the properties map directly.
        schema = {"type": "object", "properties": schema} if schema else {"type": "object"}
    schema = dict(schema)
    schema.setdefault("type", "object")
    if schema["type"] != "object":
        raise SpecError('parameters_schema must describe an object ("type": "object"): tools '
                        "receive their arguments as one JSON object on stdin.")
    if not isinstance(schema.get("properties", {}), dict):
        raise SpecError("parameters_schema.properties must be an object mapping names to schemas.")
    return schema


def check_timeout(value: object) -> int:
    """A per-tool time limit in whole seconds between 1 and MAX_TIMEOUT."""
    if value is None:
        return DEFAULT_TIMEOUT
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError(value)
        secs = int(value)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"timeout_secs must be a whole number of seconds, got {value!r}.") from exc
    if not 1 <= secs <= MAX_TIMEOUT:
        raise SpecError(f"timeout_secs must be between 1 and {MAX_TIMEOUT}, got {secs}.")
    return secs


def build_spec(name: object, description: object, parameters: object,
               timeout_secs: object = None) -> ScriptSpec:
    """Validate create_tool's arguments (or a schema file's fields) into a ScriptSpec."""
    name = check_name(name)
    if not isinstance(description, str) or not description.strip():
        raise SpecError("description must be a non-empty sentence saying what the tool does.")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION:
        raise SpecError(f"description must be at most {MAX_DESCRIPTION} characters "
                        f"(it has {len(description)}).")
    return ScriptSpec(name=name, description=description,
                      parameters=normalise_parameters(parameters),
                      timeout_secs=check_timeout(timeout_secs))


def parse_spec_file(stem: str, data: bytes) -> ScriptSpec:
    """Read scripts/<stem>.json; hand edits are held to the same rules as create_tool."""
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise SpecError(f"{stem}.json is not valid JSON: {exc}.") from exc
    if not isinstance(raw, dict):
        raise SpecError(f"{stem}.json must hold a JSON object.")
    if raw.get("name", stem) != stem:
        raise SpecError(f"{stem}.json names the tool {raw.get('name')!r}; the name must match "
                        "the file name.")
    return build_spec(stem, raw.get("description"), raw.get("parameters", {}),
                      raw.get("timeout_secs"))


def render_spec_file(spec: ScriptSpec) -> bytes:
    """The schema file as create_tool writes it: stable, indented, newline-terminated."""
    body = {"name": spec.name, "description": spec.description, "parameters": spec.parameters,
            "timeout_secs": spec.timeout_secs}
    return (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode()
