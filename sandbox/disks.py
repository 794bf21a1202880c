"""Disk faults for the sandbox: a log dir failed as Kafka's own tests fail one, a dir
made small (a tmpfs) so it fills for real, and a failed or small dir replaced.

How a disk is failed: the log dir is moved aside and a regular file put at its path, the
way Kafka's own LogDirFailureTest does it. The broker's next new file in that dir (the
high-watermark checkpoint, every second in the sandbox: sandbox/configs.py; or a segment
roll) gets an IOException and Kafka takes the whole dir offline. `chmod 000`, the
KIP-112 test plan's way, stops nothing here: the broker runs as root, and root ignores
file modes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from sandbox import cluster, kraft, processes
from sandbox.jvm import SandboxError
from sandbox.state import SandboxState

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass



def resolve_dir(state: SandboxState, broker_id: int, dir_ref: str) -> str:
    """A log dir by 0-based index or by path; a clear error naming what exists."""
    try:
        b = state.broker(broker_id)
    except KeyError as exc:
        raise SandboxError(str(exc.args[0])) from None
    listing = ", ".join(f"{i}={p}" for i, p in enumerate(b.log_dirs))
    if dir_ref.isdigit():
        index = int(dir_ref)
        if index < len(b.log_dirs):
            return b.log_dirs[index]
        raise SandboxError(f"broker {broker_id} has no log dir {index}; its dirs are {listing}")
    path = str(Path(dir_ref).resolve())
    if path in b.log_dirs:
        return path
    raise SandboxError(f"broker {broker_id} has no log dir {dir_ref}; its dirs are {listing}")


def _broken_copy(state: SandboxState, path: str) -> Path:
    rel = Path(path).relative_to(state.work_dir)
    return Path(state.work_dir) / "broken" / str(rel).replace(os.sep, "__")


def disk_failed(path: str) -> bool:
    """True when the sandbox has failed this dir (a regular file stands at its path)."""
    return Path(path).is_file()


def needs_healing(path: str) -> bool:
    """A failed dir, or a small disk (a tmpfs mount) that `heal_disk` gives back."""
    return disk_failed(path) or os.path.ismount(path)


def fail_disk(state: SandboxState, broker_id: int, dir_ref: str,
              progress: Progress = _quiet) -> str:
    """Break one log dir as Kafka's own tests do; returns its path."""
    path = resolve_dir(state, broker_id, dir_ref)
    if disk_failed(path):
        raise SandboxError(f"log dir {path} on broker {broker_id} is already failed")
    aside = _broken_copy(state, path)
    aside.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(path, aside)
    Path(path).write_text("this log dir was failed by `selfheal sandbox fail-disk`\n")
    progress(f"failed log dir {path} on broker {broker_id} (old contents in {aside})")
    return path


def small_disk(state: SandboxState, broker_id: int, dir_ref: str, free_bytes: int,
               progress: Progress = _quiet) -> str:
    """Put one log dir on a tmpfs with ``free_bytes`` left after what it holds now, so a
    write past that fails with ENOSPC as a full disk does. Needs root (mount); the broker
    is stopped while its dir moves onto the mount, then started. `heal_disk` undoes it."""
    path = resolve_dir(state, broker_id, dir_ref)
    if os.path.ismount(path):
        raise SandboxError(f"log dir {path} on broker {broker_id} is already a small disk")
    b = state.broker(broker_id)
    if processes.is_running(b.pid, b.marker):
        cluster.kill_broker(state, broker_id, graceful=True, progress=progress)
    aside = _broken_copy(state, path).with_name(_broken_copy(state, path).name + "__moving")
    aside.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(path, aside)
    os.mkdir(path)
    used = _disk_usage(aside)
    size = used + free_bytes
    try:
        _run_root(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
                  f"mount a {size}-byte tmpfs on {path}")
        # sparse copies: a stopped broker trims its indexes, but never copy holes as zeros
        _run_root(["cp", "-a", "--sparse=always", f"{aside}/.", path],
                  f"copy {aside} onto the tmpfs")
    except SandboxError:
        if os.path.ismount(path):
            subprocess.run(["umount", path], check=False)
        shutil.rmtree(path)
        os.replace(aside, path)
        cluster.start_broker(state, broker_id, progress=progress)
        raise
    shutil.rmtree(aside)
    progress(f"log dir {path} on broker {broker_id} is a tmpfs of {size} bytes "
             f"({free_bytes} free)")
    cluster.start_broker(state, broker_id, progress=progress)
    return path


def _disk_usage(path: Path) -> int:
    """Bytes the files under ``path`` take (allocated blocks, as tmpfs counts them)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def _run_root(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SandboxError(f"could not {what}: {done.stderr.strip() or done.returncode} "
                           "(a small disk is a tmpfs mount: run as root, or with "
                           "CAP_SYS_ADMIN)")


def _unmount(path: str, timeout: float = 15.0) -> None:
    """Unmount a small disk, waiting out "target is busy": a stopped broker's process can
    be reported gone a moment before the kernel has closed its files (a full run's heal
    failed that way and left the broker down for the next tests)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _run_root(["umount", path], f"unmount the small disk at {path}")
            return
        except SandboxError as exc:
            if "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise SandboxError(f"{exc}; `fuser -vm {path}` names who holds it") from exc
        time.sleep(0.5)


def heal_disk(state: SandboxState, broker_id: int, dir_ref: str, timeout: float = 120.0,
              progress: Progress = _quiet) -> str:
    """Put an empty, working disk back and restart the broker.

    Kafka never brings an offline dir back while it runs; a restart is what an operator
    does after replacing the disk. The broker re-creates and re-replicates whatever
    replicas the cluster still assigns to it.
    """
    path = resolve_dir(state, broker_id, dir_ref)
    small = os.path.ismount(path)
    if not disk_failed(path) and not small:
        raise SandboxError(f"log dir {path} on broker {broker_id} is not failed; nothing to heal")
    b = state.broker(broker_id)
    if processes.is_running(b.pid, b.marker):
        progress(f"stopping broker {broker_id} to replace the disk")
        processes.stop(b.pid, b.marker, timeout=60)
        b.pid = None
        state.save()
    if small:
        _unmount(path)
        shutil.rmtree(path)
    else:
        Path(path).unlink()
    Path(path).mkdir()
    shutil.rmtree(_broken_copy(state, path), ignore_errors=True)
    progress(f"log dir {path} replaced with an empty one")
    if state.mode == "kraft":
        kraft.format_node(state, b)
    cluster.start_broker(state, broker_id, timeout=timeout, progress=progress)
    return path
