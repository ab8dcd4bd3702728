# Wintermute recipes. `just --list` shows them.

venv := ".venv"
py := venv + "/bin/python"

# install (editable, with dev tools) into .venv
install:
    test -x {{py}} || python3 -m venv {{venv}}
    {{py}} -m pip install -q -e '.[dev]'

# run everything in the foreground and chat in this terminal
up: install
    {{venv}}/bin/wintermute up --chat

# run the whole test suite (what CI runs)
test: install
    {{venv}}/bin/pytest

# fast tests only (skip end-to-end runs of `wintermute up`)
test-fast: install
    {{venv}}/bin/pytest -m "not slow"

# ruff, and mypy --strict on every package (CI runs this too)
lint: install
    {{venv}}/bin/ruff check .
    {{venv}}/bin/mypy

# every figure of issue #14 next to its goal and the load average, also in bench.json (never asserted in tests)
bench *ARGS: install
    {{py}} -m pip install -q -e '.[bench]'
    {{py}} -m benchmarks.bench {{ARGS}}

# fault-injection campaign (kill -9, SIGSTOP, nats-server kills) that prints figures
chaos *ARGS: install
    {{py}} -m benchmarks.chaos {{ARGS}}

# build the runtime image from a Debian root filesystem (no registry needed), then check it runs
image:
    images/build-offline.sh

# the Helm stand-in node test with every wintermute container in the image built by `just image`
image-node:
    WM_NODE_IMAGE=localhost/wintermute:0.1.0 {{venv}}/bin/pytest -m slow tests/e2e/test_chart_node.py -v
