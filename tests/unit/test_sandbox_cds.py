"""Class-data sharing for the sandbox's JVMs (sandbox/cds.py): which archive a JVM maps,
who records and dumps it, and every way of falling back to a start without one. The JVMs
here are the real JDK's, on a classpath of one tiny jar."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from sandbox import cds, jvm

OPTIONS = jvm.SMALL_MACHINE_JVM_OPTIONS


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A jar with one class, Hello, that says hello: the archive holds classes of the
    classpath, so a JVM maps it only with the same classpath."""
    src = tmp_path_factory.mktemp("src")
    (src / "Hello.java").write_text(
        'public class Hello { public static void main(String[] a) {'
        ' System.out.println("hello"); } }\n')
    subprocess.run(["javac", "-d", str(src), str(src / "Hello.java")], check=True)
    jar = src / "hello.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.write(src / "Hello.class", "Hello.class")
    return jar.read_bytes()


@pytest.fixture
def classpath(tmp_path: Path, compiled: bytes) -> str:
    jar = tmp_path / "lib" / "hello.jar"
    jar.parent.mkdir()
    jar.write_bytes(compiled)
    return str(jar)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cds.DIR_ENV, str(tmp_path / "cds"))
    monkeypatch.setattr(cds, "MIN_CLASSES", 50)
    return tmp_path / "cds"


def _archive(classpath: str, kind: str = "tool", options: tuple[str, ...] = OPTIONS
             ) -> cds.Archive:
    found = cds.archive(kind, jvm.java(), classpath, options)
    assert found is not None
    return found


def _start(shared: cds.Archive, *extra: str) -> subprocess.CompletedProcess[str]:
    """One JVM of the kind, with what jvm_options gave it: Hello from the classpath."""
    done = subprocess.run([shared.java, *shared.options, *extra, "-cp", shared.classpath,
                           "Hello"], capture_output=True, text=True, timeout=120)
    assert "hello" in done.stdout.splitlines(), done.stdout + done.stderr
    return done


def _settle(path: Path) -> None:
    past = time.time() - cds.SETTLE_SECONDS - 1
    os.utime(path, (past, past))


def test_the_key_follows_the_kind_the_options_and_each_jar(folder: Path, classpath: str
                                                           ) -> None:
    first = _archive(classpath).key
    assert _archive(classpath).key == first
    assert _archive(classpath, kind="broker").key != first
    assert _archive(classpath, options=("-XX:+UseSerialGC",)).key != first
    Path(classpath).write_bytes(Path(classpath).read_bytes() + b"\0")  # new jars, same path
    assert _archive(classpath).key != first


def test_the_key_follows_the_jdk(folder: Path, classpath: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    first = _archive(classpath).key
    monkeypatch.setattr(cds, "_java_identity", lambda java: "another JDK")
    assert _archive(classpath).key != first


def test_a_wildcard_entry_stands_for_its_jars(folder: Path, classpath: str) -> None:
    wild = str(Path(classpath).parent / "*")
    first = _archive(wild).key
    (Path(classpath).parent / "more.jar").write_bytes(Path(classpath).read_bytes())
    assert _archive(wild).key != first


def test_the_first_start_records_and_a_concurrent_one_starts_without(
        folder: Path, classpath: str) -> None:
    shared = _archive(classpath)
    recording = cds.jvm_options(shared)
    assert recording == [f"-XX:DumpLoadedClassList={shared.path('.classlist')}"]
    assert cds.jvm_options(shared) == []  # the list is fresh: still recording
    done = _start(shared, *recording)
    assert done.returncode == 0, done.stderr
    assert shared.path(".classlist").read_text().count("\n") > cds.MIN_CLASSES


def test_a_settled_list_is_dumped_checked_and_mapped_by_later_starts(
        folder: Path, classpath: str) -> None:
    shared = _archive(classpath)
    assert _start(shared, *cds.jvm_options(shared)).returncode == 0
    _settle(shared.path(".classlist"))
    options = cds.jvm_options(shared)
    assert options == [f"-XX:SharedArchiveFile={shared.path('.jsa')}", "-Xshare:auto",
                       cds.QUIET]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        shared.path(s).name for s in (".classlist", ".jsa", ".lock"))  # no temporary left
    mapped = _start(shared, *options[:1], "-Xshare:on", "-Xlog:class+load=info")
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr
    assert "Hello source: shared objects file" in mapped.stdout  # the classpath's too
    assert mapped.stdout.count("shared objects file") > cds.MIN_CLASSES
    assert cds.jvm_options(shared) == options  # the next start maps it without a dump


def test_a_list_cut_mid_line_is_dumped_up_to_its_last_whole_line(
        folder: Path, classpath: str) -> None:
    shared = _archive(classpath)
    assert _start(shared, *cds.jvm_options(shared)).returncode == 0
    with shared.path(".classlist").open("a") as listed:
        listed.write("java/lang/Thr")  # the recorder was writing a name
    _settle(shared.path(".classlist"))
    assert cds.jvm_options(shared)[0].startswith("-XX:SharedArchiveFile=")


def test_a_refused_dump_is_written_down_and_not_tried_again(
        folder: Path, classpath: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = _archive(classpath)
    assert _start(shared, *cds.jvm_options(shared)).returncode == 0
    _settle(shared.path(".classlist"))
    refusing = cds.Archive(shared.kind, shared.java, shared.classpath,
                           (*OPTIONS, "-XX:SharedSymbolTableSize=1"), folder)
    monkeypatch.setattr(cds.Archive, "key", shared.key)  # the same files, a dump that fails
    assert cds.jvm_options(refusing) == []
    assert not shared.path(".jsa").exists()
    assert "exit 1: -Xshare:dump" in shared.path(".refused").read_text()
    assert cds.jvm_options(refusing) == []
    assert cds.jvm_options(shared) == []  # refused for the key, whoever asks
    assert not list(folder.glob("*.tmp"))


def test_a_list_from_a_jvm_that_died_at_start_is_recorded_again(
        folder: Path, classpath: str) -> None:
    shared = _archive(classpath)
    assert cds.jvm_options(shared)[0].startswith("-XX:DumpLoadedClassList=")
    shared.path(".classlist").write_text("java/lang/Object\n")
    _settle(shared.path(".classlist"))
    assert cds.jvm_options(shared) == []
    assert cds.jvm_options(shared)[0].startswith("-XX:DumpLoadedClassList=")


def test_a_dump_in_progress_elsewhere_is_not_waited_for(folder: Path, classpath: str) -> None:
    shared = _archive(classpath)
    assert _start(shared, *cds.jvm_options(shared)).returncode == 0
    _settle(shared.path(".classlist"))
    with shared.path(".lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert cds.jvm_options(shared) == []
    assert cds.jvm_options(shared)[0].startswith("-XX:SharedArchiveFile=")


def test_a_folder_that_cannot_be_made_starts_without(
        tmp_path: Path, classpath: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(cds.DIR_ENV, str(tmp_path / "a-file" / "cds"))
    assert cds.jvm_options(_archive(classpath)) == []


def test_off_starts_every_jvm_without(classpath: str, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    monkeypatch.setenv(cds.DIR_ENV, "off")
    assert cds.archive("tool", jvm.java(), classpath, OPTIONS) is None
    assert cds.jvm_options(None) == []
    assert jvm.class_sharing("tool", classpath) == []


def test_the_spark_driver_shares_classes_only_when_asked_and_keeps_named_options(
        folder: Path) -> None:
    from streams.spark import DRIVER_JAVA_OPTIONS_ENV as NAME

    assert jvm.small_machine_env({}) == {NAME: " ".join(OPTIONS)}
    mine = {NAME: "-XX:+UseParallelGC"}
    assert jvm.small_machine_env(mine) == mine
    shared = jvm.small_machine_env(mine, share_classes=True)[NAME].split()
    assert shared[0] == "-XX:+UseParallelGC"
    assert shared[1].startswith("-XX:DumpLoadedClassList=")
    assert "spark-driver-" in shared[1]
