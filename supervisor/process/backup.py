"""`wintermute backup` and `wintermute restore`: the whole agent in one archive.

An archive (`backups/wintermute-<time>.tar.gz`, mode 0600) holds:

- `home/`: config.toml, agent.toml, the prompt files (AGENTS.md, USER.md, IDENTITY.md,
  HEARTBEAT.md), `.env` (unless `--no-secrets`), docs/, workspace/ and skills/;
- `scripts.bundle`: a git bundle of scripts/ with its whole history;
- `home.bundle`: a git bundle of data/home.git, the versions of AGENTS.md and USER.md;
- `memory/`: the LanceDB store;
- `jetstream/<STREAM>.jsonl`: every message of every stream (subject, headers, payload), and
  `jetstream/kv/<bucket>.json`: the latest value of every key (health excepted: it is live).

`restore` unpacks it into a home where Wintermute is not running, starts the embedded
nats-server once to load the streams and buckets, and creates every durable consumer
positioned after the restored history, so nothing restored is handled (or answered) again.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bus import Bus, ensure_consumer
from bus.history import read_stream
from contracts.config import Settings
from kit.safegit import GitError, clone_bundle, git_dir, has_repo, run_git

HOME_FILES = ("config.toml", "agent.toml", "AGENTS.md", "USER.md", "IDENTITY.md", "HEARTBEAT.md")
HOME_DIRS = ("docs", "workspace", "skills")
SKIP_BUCKETS = ("health",)  # live state, rebuilt within seconds


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return info if info.isfile() or info.isdir() else None


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
    tar.addfile(info, io.BytesIO(data))


async def _export_bus(bus: Bus, tar: tarfile.TarFile) -> dict[str, int]:
    counts: dict[str, int] = {}
    for spec in bus.subjects.streams():
        lines = []
        async for stored in read_stream(bus, spec.name):
            lines.append(json.dumps({"subject": stored.subject, "headers": stored.headers,
                                     "data": base64.b64encode(stored.data).decode()}))
        counts[spec.name] = len(lines)
        _add_bytes(tar, f"jetstream/{spec.name}.jsonl", ("\n".join(lines) + "\n").encode())
    for bucket in bus.subjects.buckets():
        if any(bucket.name.endswith("_" + skip) for skip in SKIP_BUCKETS):
            continue
        values = {}
        for key in await bus.kv_keys(bucket.name):
            value = await bus.kv_get(bucket.name, key)
            if value is not None:
                values[key] = base64.b64encode(value).decode()
        counts[bucket.name] = len(values)
        _add_bytes(tar, f"jetstream/kv/{bucket.name}.json", json.dumps(values).encode())
    return counts


async def backup(settings: Settings, bus: Bus, dest: Path | None = None, *,
                 secrets: bool = True, keep: int = 0) -> tuple[Path, dict[str, int]]:
    """Write an archive; returns its path and what it holds (messages per stream, keys per
    bucket). `keep` > 0 deletes older archives beyond that many."""
    home = settings.home
    folder = dest or home / "backups"
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    path = folder / time.strftime("wintermute-%Y%m%d-%H%M%S.tar.gz")
    part = path.with_suffix(".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name in (*HOME_FILES, *((".env",) if secrets else ())):
            if (home / name).is_file():
                tar.add(home / name, f"home/{name}")
        for name in HOME_DIRS:
            if (home / name).is_dir():  # regular files and folders only: no planted links
                tar.add(home / name, f"home/{name}", filter=_plain)
        # Only data/scripts.git: a scripts/.git is the sandbox's to write and never read
        # (kit.safegit; `up` moves an old one aside).
        if has_repo(home / "scripts"):
            with tempfile.TemporaryDirectory() as tmp:
                bundle = Path(tmp) / "scripts.bundle"
                try:
                    run_git(home / "scripts", "bundle", "create", str(bundle), "--all")
                except GitError as exc:
                    raise RuntimeError(f"git bundle of scripts/ failed: {exc}") from exc
                tar.add(bundle, "scripts.bundle")
        _bundle_home(home, tar)
        memory = home / "data" / "memory"
        if memory.is_dir():
            tar.add(memory, "memory", filter=_plain)
        counts = await _export_bus(bus, tar)
    part.replace(path)
    if keep > 0:
        for old in sorted(folder.glob("wintermute-*.tar.gz"))[:-keep]:
            old.unlink()
    return path, counts


def _bundle_home(home: Path, tar: tarfile.TarFile) -> None:
    """data/home.git (the WriteGate's versions) as a bundle: objects and refs, no config."""
    gdir = home / "data" / "home.git"
    if not (gdir / "HEAD").is_file():
        return
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "home.bundle"
        try:
            run_git(home, "bundle", "create", str(bundle), "--all", gdir=gdir)
        except GitError as exc:
            raise RuntimeError(f"git bundle of data/home.git failed: {exc}") from exc
        tar.add(bundle, "home.bundle")


def _restore_home(home: Path, bundle: Path) -> None:
    """A fresh data/home.git with the bundle's history; the restored files are its work tree."""
    gdir = home / "data" / "home.git"
    if gdir.exists():
        shutil.rmtree(gdir)
    try:
        run_git(home, "init", "-q", gdir=gdir)
        run_git(home, "-c", "protocol.file.allow=always", "fetch", "-q", "--update-head-ok",
                str(bundle), "+refs/heads/*:refs/heads/*", gdir=gdir)
        run_git(home, "reset", "-q", gdir=gdir)  # the index as committed; files untouched
    except GitError as exc:
        raise RuntimeError(f"restoring data/home.git failed: {exc}") from exc


def _safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Members that stay inside the target (no absolute paths, `..`, links or devices)."""
    safe = []
    for member in tar.getmembers():
        parts = Path(member.name).parts
        if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
            raise ValueError(f"the archive has an unsafe entry {member.name!r}; not restored")
        safe.append(member)
    return safe


async def restore(settings: Settings, archive: Path) -> dict[str, int]:
    """Unpack `archive` into the (stopped) home and load the bus; what was loaded."""
    from supervisor.process.up import running_instance

    home = settings.home
    if running_instance(home):
        raise RuntimeError(f"wintermute is running for {home}: stop it before restoring")
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive, "r:gz") as tar:
        root = Path(tmp)
        tar.extractall(root, members=_safe_members(tar))  # noqa: S202 - members checked above
        for item in (root / "home").iterdir() if (root / "home").is_dir() else ():
            target = home / item.name
            if item.is_dir():
                shutil.copytree(item, target, dirs_exist_ok=True)
            else:
                shutil.copy2(item, target)
        if (home / ".env").exists():
            os.chmod(home / ".env", 0o600)
        if (root / "scripts.bundle").exists():
            scripts = home / "scripts"
            for old in (scripts, git_dir(scripts)):
                if old.exists():
                    shutil.rmtree(old)
            try:  # into data/scripts.git with scripts/ as its work tree, as `up` keeps it
                clone_bundle(scripts, root / "scripts.bundle")
            except GitError as exc:
                raise RuntimeError(f"restoring scripts/ failed: {exc}") from exc
        if (root / "home.bundle").exists():
            _restore_home(home, root / "home.bundle")
        if (root / "memory").is_dir():
            shutil.copytree(root / "memory", home / "data" / "memory", dirs_exist_ok=True)
        from contracts.config import load_settings

        # The archive's config.toml decides the prefix and the consumers to position.
        return await _load_bus(load_settings(home), root / "jetstream")


async def _load_bus(settings: Settings, folder: Path) -> dict[str, int]:
    """Streams and buckets into the instance's store; durables positioned after the history."""
    from supervisor.process import natsauth
    from supervisor.process.natsserver import EmbeddedNats
    from supervisor.process.provision import actor_subscriptions

    home, cfg = settings.home, settings.config.nats
    durables = actor_subscriptions(settings)
    server: EmbeddedNats | None = None
    url, login = cfg.url, {"user": cfg.user, "password": cfg.password,
                           "credentials": cfg.credentials, "seed": cfg.seed,
                           "api_prefix": cfg.api_prefix}
    if not url:  # the embedded server, started on the home's store just for this
        auth = natsauth.prepare(home, Bus("", cfg.prefix).subjects, durables)
        server = EmbeddedNats(home / "data" / "jetstream", 0, home / "logs" / "nats-restore.log",
                              config=auth.config)
        url = await server.start()
        login = auth.login("supervisor")
    bus = Bus(url, cfg.prefix, name="wintermute-restore")
    counts: dict[str, int] = {}
    try:
        await bus.connect(timeout=30, **login)
        await bus.provision()
        for spec in bus.subjects.streams():
            if await _last_seq(bus, spec.name):
                raise RuntimeError(f"the stream {spec.name} already holds messages: restore into "
                                   "a fresh home (or remove data/jetstream first)")
        for spec in bus.subjects.streams():
            source = folder / f"{spec.name}.jsonl"
            lines = source.read_text().splitlines() if source.exists() else []
            for line in filter(None, lines):
                entry = json.loads(line)  # a line of our own archive, not a KV value
                headers = {k: v for k, v in (entry.get("headers") or {}).items()
                           if k != "Nats-Msg-Id"}  # the id's dedupe window is not history
                await bus.publish_raw(entry["subject"], base64.b64decode(entry["data"]),
                                      headers=headers)
            counts[spec.name] = len(lines)
        for source in sorted((folder / "kv").glob("*.json")) if (folder / "kv").is_dir() else ():
            values = json.loads(source.read_text())  # our archive's file
            for key, value in values.items():
                await bus.kv_put(source.stem, key, base64.b64decode(value))
            counts[source.stem] = len(values)
        for subs in durables.values():
            for sub in subs:
                await ensure_consumer(bus, sub, start_after=await _last_seq(bus, sub.stream))
    finally:
        await bus.close()
        if server is not None:
            await server.stop()
    return counts


async def backup_now(settings: Settings, dest: Path | None, secrets: bool,
                     keep: int) -> tuple[Path, dict[str, int]]:
    """Connect as the instance's admin (its streams and buckets are read whole) and back up."""
    from supervisor.cli.client import nats_url
    from supervisor.process.natsauth import connect_kwargs

    cfg = settings.config.nats
    login: dict[str, str] = ({"user": cfg.user, "password": cfg.password,
                              "credentials": cfg.credentials, "seed": cfg.seed,
                              "api_prefix": cfg.api_prefix} if cfg.url
                             else connect_kwargs(settings.home, "supervisor"))
    bus = Bus(nats_url(settings), cfg.prefix, name="wintermute-backup")
    await bus.connect(timeout=15, **login)
    try:
        return await backup(settings, bus, dest, secrets=secrets, keep=keep)
    finally:
        await bus.close()


async def scheduled_backups(settings: Settings, bus: Bus,
                            notify: Callable[[str, str], Awaitable[None]]) -> None:
    """The supervisor's backup loop: `backup.cron` (local time), keeping `backup.keep`
    archives; a failure is told to the owner, and the next run is tried as scheduled."""
    import logging

    from croniter import croniter

    log = logging.getLogger(__name__)
    cfg = settings.config.backup
    if not cfg.enabled:
        return
    while True:
        now = time.time()
        due = float(croniter(cfg.cron, dt_local(now)).get_next(float))
        await asyncio.sleep(max(1.0, due - now))
        try:
            path, counts = await backup(settings, bus, secrets=cfg.secrets, keep=cfg.keep)
            log.info("scheduled backup written to %s (%s)", path, counts)
        except Exception as exc:  # noqa: BLE001 - told to the owner; the next run tries again
            log.exception("scheduled backup failed")
            await notify(f"The scheduled backup failed: {exc}. The next one runs at its usual "
                         "time; `wintermute backup` runs one now.", "backup:failed")


def dt_local(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts).astimezone()


async def _last_seq(bus: Bus, stream: str) -> int:
    """The last sequence of a stream (0 when it is empty or missing)."""
    state = await bus.stream_state(stream)
    return int(state.last_seq or 0) if state else 0
