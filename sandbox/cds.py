"""Class-data sharing (AppCDS) for the sandbox's JVMs: each kind of JVM (a broker, a
controller, ZooKeeper, one of Kafka's tools, the job's Spark driver) maps an archive of
the classes it loads at start, parsed and verified once, instead of reading them from
its jars at every start.

An archive is made from what one JVM of its kind loaded: the first start records its
class list (``-XX:DumpLoadedClassList``, written as classes load); a later start, once
that list has stopped growing, dumps a static archive from it (``-Xshare:dump``) and
maps it. The archive is named by a hash of the JDK, the classpath (each jar's size and
time) and the options, so a new JDK, new jars or other options make a new one. A JVM
maps an archive only whole: it is dumped to a temporary file, checked by a JVM that must
map it (``-Xshare:on``), then renamed into place (a truncated archive crashes every JVM
that maps it, SIGBUS). Anything else (no archive yet, another process dumping it, a
refused dump, a folder that cannot be written) starts the JVM without one, as before.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import re
import subprocess
import time
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from sandbox import jars

DIR_ENV = "SELFHEAL_CDS_DIR"  # where archives are kept; "off" starts every JVM without
# The recording JVM loaded no class for this long: its start-up is over.
SETTLE_SECONDS = 20.0
# A list shorter than this is a JVM that died at start: it is recorded again.
MIN_CLASSES = 500
# The JVM logs a refused archive as a warning on stdout, which the tools share with
# their output: off.
QUIET = "-Xlog:cds*=off"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def archive_dir() -> Path | None:
    """``$SELFHEAL_CDS_DIR``, else ``.make/cds`` in the checkout; None when it is "off"."""
    named = os.environ.get(DIR_ENV, "")
    if named == "off":
        return None
    return Path(named) if named else jars.REPO_ROOT / ".make" / "cds"


@lru_cache(maxsize=4)
def _java_identity(java: str) -> str:
    """The JDK an archive belongs to: its real path and what ``java -version`` says."""
    said = subprocess.run([java, "-Xshare:auto", "-version"], capture_output=True,
                          text=True, timeout=60)
    return f"{os.path.realpath(java)}\n{said.stderr}"


def _entries(classpath: str) -> list[str]:
    """The classpath's entries, a ``dir/*`` one as its jars (what the java launcher does)."""
    found: list[str] = []
    for entry in classpath.split(os.pathsep):
        found += sorted(glob.glob(entry[:-1] + "*.jar")) if entry.endswith("*") else [entry]
    return found


@dataclass(frozen=True)
class Archive:
    """One kind of JVM: started with ``options`` on ``classpath`` by ``java``."""

    kind: str  # a label of the archive's file name: "broker", "spark-driver", ...
    java: str
    classpath: str
    options: tuple[str, ...]  # the options that shape an archive (GC, compilers)
    folder: Path

    @cached_property
    def key(self) -> str:
        digest = hashlib.sha256()
        for part in (self.kind, _java_identity(self.java), self.classpath, *self.options):
            digest.update(part.encode() + b"\0")
        for entry in _entries(self.classpath):
            try:
                st = os.stat(entry)
            except OSError:
                continue  # the JVM skips a missing entry too
            digest.update(f"{entry}:{st.st_size}:{st.st_mtime_ns}\0".encode())
        return f"{_UNSAFE.sub('_', self.kind)}-{digest.hexdigest()[:20]}"

    def path(self, suffix: str) -> Path:
        return self.folder / f"{self.key}{suffix}"


def archive(kind: str, java: str, classpath: str, options: tuple[str, ...]) -> Archive | None:
    """The archive of one kind of JVM, or None when class-data sharing is off."""
    folder = archive_dir()
    return None if folder is None else Archive(kind, java, classpath, options, folder)


def jvm_options(shared: Archive | None) -> list[str]:
    """The options one start of this kind adds: map its archive when there is one (made
    now if its class list is complete), record the class list when no JVM has, else none."""
    if shared is None:
        return []
    try:
        return _options(shared)
    except (OSError, subprocess.SubprocessError):
        return []  # a folder that cannot be written, a full disk: start without


def _options(shared: Archive) -> list[str]:
    jsa, listed = shared.path(".jsa"), shared.path(".classlist")
    if jsa.exists():
        return _mapping(jsa)
    if shared.path(".refused").exists():
        return []
    shared.folder.mkdir(parents=True, exist_ok=True)
    try:  # the first start records; O_EXCL: one recorder among concurrent starts
        os.close(os.open(listed, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return [f"-XX:DumpLoadedClassList={listed}"]
    except FileExistsError:
        pass
    if time.time() - listed.stat().st_mtime < SETTLE_SECONDS:
        return []  # still recording
    return _mapping(jsa) if dump(shared) else []


def _mapping(jsa: Path) -> list[str]:
    return [f"-XX:SharedArchiveFile={jsa}", "-Xshare:auto", QUIET]


def dump(shared: Archive) -> bool:
    """Make the archive from the recorded class list; True when it is in place. A dump
    another process is making is not waited for (False); a refused one is written down
    (``.refused``, with the JVM's words) and not tried again for this key."""
    jsa, listed = shared.path(".jsa"), shared.path(".classlist")
    with open(shared.path(".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if jsa.exists():
            return True
        text = listed.read_bytes()
        complete = text[: text.rfind(b"\n") + 1]  # the recorder may be mid-line
        if complete.count(b"\n") < MIN_CLASSES:
            listed.unlink()
            return False
        tmp = shared.path(f".{os.getpid()}.tmp")
        tmp_list = shared.path(f".{os.getpid()}.classlist.tmp")
        tmp_list.write_bytes(complete)
        try:
            said = _run(shared, "-Xshare:dump", f"-XX:SharedClassListFile={tmp_list}",
                        f"-XX:SharedArchiveFile={tmp}")
            if said is None:  # the dump worked: a JVM must map it before any other sees it
                said = _run(shared, "-Xshare:on", f"-XX:SharedArchiveFile={tmp}", "-version")
            if said is None:
                os.replace(tmp, jsa)
                return True
            shared.path(".refused").write_text(said)
            return False
        finally:
            tmp.unlink(missing_ok=True)
            tmp_list.unlink(missing_ok=True)


def _run(shared: Archive, *args: str) -> str | None:
    """None when ``java <options> -cp <classpath> <args>`` exits 0, else its output's end
    (the launcher reads no option after ``-version``: ``-cp`` goes first)."""
    done = subprocess.run([shared.java, *shared.options, "-cp", shared.classpath, *args],
                          capture_output=True, text=True, timeout=600)
    if done.returncode == 0:
        return None
    return f"exit {done.returncode}: {' '.join(args)}\n{(done.stdout + done.stderr)[-2000:]}"
