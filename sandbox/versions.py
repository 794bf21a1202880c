"""The Kafka lines the sandbox runs, one table each: what differs between them lives here
and nowhere else (no `if version` across the code).

`jvm/pom.xml` pins the same lines as profiles `kafka-<line>` whose jars land in
`jvm/lib/kafka-<line>`; a unit test holds the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RELOAD4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log_file}
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.server.epoch=WARN
log4j.logger.state.change.logger=INFO
"""

# The same settings in Log4j2's properties format (Kafka 4 moved to Log4j2, KIP-653).
LOG4J2 = """\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.filePattern = {log_file}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.channel.name = kafka.network.RequestChannel$
logger.channel.level = WARN
logger.epoch.name = kafka.server.epoch
logger.epoch.level = WARN
logger.state.name = state.change.logger
logger.state.level = INFO
"""


@dataclass(frozen=True)
class KafkaLine:
    """One supported Kafka line and everything the sandbox does differently for it."""

    line: str  # "3.9", "4.4": what `--kafka` takes
    version: str  # the release jvm/pom.xml pins
    modes: tuple[str, ...]  # "zk" and/or "kraft"
    log_config_name: str  # the logging config file each server gets
    log_config: str  # its text, with {log_file}
    log_config_flag: str  # the JVM property that points at it
    # KRaft quorum: "static" (controller.quorum.voters) or "dynamic" (KIP-853:
    # controller.quorum.bootstrap.servers, the controller formatted --standalone)
    quorum: str
    release_version: str  # `format --release-version`: the metadata version to start at
    reassign_tool: str  # kafka-reassign-partitions' main class
    configs_tool: str  # kafka-configs' main class
    leader_election_tool: str
    log_dirs_tool: str
    # KIP-848's rebalance protocol (`group.protocol=consumer`) served by default: GA in
    # 4.0; 3.9 has it as early access, off unless group.coordinator.rebalance.protocols
    consumer_protocol: bool = False

    @property
    def jars_role(self) -> str:
        """Its folder under jvm/lib (and the pom profile's id)."""
        return f"kafka-{self.line}"

    def log_flag(self, conf_dir: Path) -> str:
        return f"-D{self.log_config_flag}=file:{conf_dir / self.log_config_name}"

    def write_log_config(self, conf_dir: Path, log_file: Path) -> Path:
        path = conf_dir / self.log_config_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.log_config.format(log_file=log_file))
        return path


LINES: dict[str, KafkaLine] = {k.line: k for k in (
    KafkaLine(
        line="3.9", version="3.9.2", modes=("zk", "kraft"),
        log_config_name="log4j.properties", log_config=RELOAD4J,
        log_config_flag="log4j.configuration",
        quorum="static",
        # KIP-858: JBOD in KRaft needs metadata version 3.7-IV2 or later.
        release_version="3.9",
        reassign_tool="org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        configs_tool="kafka.admin.ConfigCommand",
        leader_election_tool="org.apache.kafka.tools.LeaderElectionCommand",
        log_dirs_tool="org.apache.kafka.tools.LogDirsCommand",
    ),
    KafkaLine(
        line="4.4", version="4.4.0", modes=("kraft",),
        log_config_name="log4j2.properties", log_config=LOG4J2,
        log_config_flag="log4j2.configurationFile",
        quorum="dynamic",
        release_version="4.4",
        reassign_tool="org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        configs_tool="org.apache.kafka.tools.ConfigCommand",
        leader_election_tool="org.apache.kafka.tools.LeaderElectionCommand",
        log_dirs_tool="org.apache.kafka.tools.LogDirsCommand",
        consumer_protocol=True,
    ),
)}

DEFAULT_LINE = "4.4"  # the newest 4.x Maven serves: what a user installing Kafka gets
OLDEST_LINE = "3.9"  # the last line with ZooKeeper mode; the state files before --kafka


class UnsupportedKafka(ValueError):
    """A Kafka line or line-and-mode the sandbox does not run; the message says why."""


def line(name: str) -> KafkaLine:
    try:
        return LINES[name]
    except KeyError:
        raise UnsupportedKafka(f"--kafka must be one of {', '.join(LINES)}, not {name!r}"
                               ) from None


def default_mode(name: str) -> str:
    """KRaft wherever the line has it (every line does)."""
    return "kraft" if "kraft" in line(name).modes else line(name).modes[0]


def check_mode(name: str, mode: str) -> KafkaLine:
    """The line, or one line saying why it cannot run in ``mode``."""
    found = line(name)
    if mode not in ("zk", "kraft"):
        raise UnsupportedKafka(f"--mode must be zk or kraft, not {mode!r}")
    if mode not in found.modes:
        zk_lines = [k.line for k in LINES.values() if "zk" in k.modes]
        raise UnsupportedKafka(
            f"Kafka {found.line} runs KRaft only (ZooKeeper mode was removed in 4.0, "
            f"KIP-833): use --mode kraft, or --kafka {' or '.join(zk_lines)} for "
            "ZooKeeper mode")
    return found
