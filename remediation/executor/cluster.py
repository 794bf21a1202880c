"""The executor's hands on the cluster: reads for a `LiveView`, and the Admin API calls.

Everything here talks to Kafka through one kafka-python admin client (the only Python
client with reassignment and log-dir calls). Replies are reduced to plain values and
Kafka's per-partition errors to `ClusterError` messages that name the partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from core.acls import denial
from core.live import PlacementMemory, finalized_level, read_snapshot
from core.model import ClusterModel
from remediation.executor import cordon
from remediation.executor.cordon import CordonConfig
from remediation.executor.throttle import Beneath, Configs, inherited, split
from remediation.executor.view import TP, LiveView, Reassigning, leader_counts
from schemas.snapshot import snapshot_from_dict

PREFERRED = 0  # ElectLeaders election type


UNANSWERED_WAIT_SECONDS = 60.0


class ClusterError(RuntimeError):
    """An Admin API call failed; the message names the call and what it was about."""


@contextmanager
def _calling(what: str, admin: Any = None) -> Iterator[None]:
    """Any failure of an Admin API call becomes a ClusterError naming the call: the
    executor retries it on its next step instead of stopping.

    kafka-python's admin keeps the controller it found first and looks again only when
    a reply says NotController; a controller that died since fails every later call with
    UnknownBrokerIdError (seen when two brokers died, one of them the controller). After
    any failure the next call looks the controller up afresh."""
    try:
        yield
    except ClusterError:
        raise
    except Exception as exc:
        if admin is not None and hasattr(admin, "_controller_id"):
            admin._controller_id = None
        denied = denial(exc, getattr(admin, "selfheal_security", None), what.split()[0])
        raise ClusterError(denied or f"{what} failed: {type(exc).__name__}: {exc}") from exc


def _error_name(err: Any) -> str | None:
    """None for success, else the Kafka error's name (kafka-python gives classes)."""
    if err is None:
        return None
    name = getattr(err, "__name__", None) or type(err).__name__
    return None if name == "NoError" else name


class KafkaCluster:
    """One cluster, read and changed through `admin` (a kafka-python KafkaAdminClient)."""

    def __init__(self, admin: Any, cluster_id: str | None = None) -> None:
        self.admin = admin
        self.cluster_id = cluster_id
        # Carried from read to read: replicas of a dir that failed keep their last dir.
        self.memory = PlacementMemory()
        self.last_view: LiveView | None = None  # the latest read, for the approval pages
        self._unanswered_since: dict[int, float] = {}  # broker -> monotonic

    # --- reads ------------------------------------------------------------------------

    def read(self, future_of: Iterable[int] = (), topics: Iterable[str] | None = None
             ) -> LiveView:
        """The live cluster; `future_of` lists brokers whose dir moves in flight matter.

        With `topics`, the model holds only their partitions (brokers and dirs are always
        whole): an action's checks look at its own partitions, and building the model of
        a 100,000-partition cluster for each step would cost seconds.
        """
        try:
            doc = read_snapshot(self.admin, self.cluster_id, self.memory)
        except ClusterError:
            raise
        except Exception as exc:
            denied = denial(exc, getattr(self.admin, "selfheal_security", None))
            raise ClusterError(denied or f"cannot read the cluster: {exc}") from exc
        # Who went silent is kept before the next call can fail: the reassignment list
        # goes to the admin's "controller", in KRaft any broker, so a killed target can
        # fail it too (seen on a run), and a read that failed there kept no silence. A
        # CI run's target killed and back within seconds was so never said silent.
        self._wait_for_unanswered()
        reassigning = self.reassignments()
        dir_bytes: dict[tuple[int, str], int] | None = None
        leaders: dict[int, int] | None = None
        if topics is not None:
            # An action's premise (is the broker skewed, do leaders even out) is about the
            # whole cluster: tally it from the raw read before keeping only `topics`.
            dir_bytes, leaders = _tallies(doc["partitions"])
            wanted = set(topics)
            doc["partitions"] = [p for p in doc["partitions"] if p["topic"] in wanted]
            # Reassignments stay whole: the policy limits them per broker, cluster-wide.
        model = ClusterModel(snapshot_from_dict(doc))
        # The future replicas come from the same DescribeLogDirs answers as the dirs: a
        # second call that went unanswered made a move in flight look vanished while the
        # replica's last known dir (the memory's) looked like its target.
        answered = frozenset(model.alive - self.memory.unanswered)
        future: dict[tuple[str, int, int], str] = {}
        sizes: dict[tuple[str, int, int], int] = {}
        for b in sorted(set(future_of) & answered):
            if b in self.memory.answers:
                found = self.memory.answers[b][1]
                future.update({(t, p, b): path for (t, p), path in found.future.items()})
                sizes.update({(t, p, b): n for (t, p), n in found.future_bytes.items()})
        self.last_view = LiveView(model, reassigning, future, dir_bytes, leaders, answered,
                                  sizes)
        return self.last_view

    def silent(self) -> frozenset[int]:
        """Registered brokers that did not answer the latest read's DescribeLogDirs."""
        return frozenset(self._unanswered_since)

    def _wait_for_unanswered(self) -> None:
        """A read in which a registered broker did not answer DescribeLogDirs is not
        decided on for up to `UNANSWERED_WAIT_SECONDS`: its dirs are the last known ones,
        and a broker just restarted with a replaced disk still shows the old one offline
        there (a full test run superseded a good fix as 'stale' so). ClusterError makes
        the executor ask again in a few seconds; past the wait, the last known dirs are
        used (a broker that stays registered but silent must not stop every action)."""
        now = time.monotonic()
        silent = self.memory.unanswered
        self._unanswered_since = {b: self._unanswered_since.get(b, now) for b in silent}
        waiting = sorted(b for b, since in self._unanswered_since.items()
                         if now - since < UNANSWERED_WAIT_SECONDS)
        if waiting:
            raise ClusterError(
                f"broker {', '.join(map(str, waiting))} did not answer DescribeLogDirs (just "
                "restarted?); its log dirs are not known now, so nothing is decided yet "
                f"(for up to {UNANSWERED_WAIT_SECONDS:g} s; then its last known dirs are "
                "used)")

    def reassignments(self) -> dict[TP, Reassigning]:
        """Every partition reassignment in flight on the cluster."""
        with _calling("ListPartitionReassignments", self.admin):
            found = self.admin.list_partition_reassignments()
        return {(tp.topic, tp.partition): Reassigning(tuple(r["replicas"]),
                                                      tuple(r["adding_replicas"]),
                                                      tuple(r["removing_replicas"]))
                for tp, r in found.items()}

    def up_brokers(self) -> set[str]:
        """'broker:N' of each broker DescribeCluster lists as up (not fenced), read now."""
        with _calling("DescribeCluster", self.admin):
            answer = self.admin.describe_cluster()
        return {f"broker:{b['broker_id']}" for b in answer["brokers"]
                if not b.get("is_fenced", False)}

    def configs(self, resources: Iterable[str], keys: Iterable[str]) -> Configs:
        """The values now set for `keys` on each resource ('broker:1', 'topic:t'); None
        when unset (a cluster-wide default does not count: it stays when ours goes)."""
        from kafka.admin import ConfigResource, ConfigResourceType

        wanted = list(keys)
        res = list(resources)
        if not res:
            return {}
        kinds = {"broker": ConfigResourceType.BROKER, "topic": ConfigResourceType.TOPIC}
        with _calling("DescribeConfigs", self.admin):
            reply = self.admin.describe_configs(
                [ConfigResource(kinds[split(r)[0]], split(r)[1]) for r in res])
        out: Configs = {}
        for r in res:
            kind, name = split(r)
            found = reply.get(kind, {}).get(name, {})
            out[r] = {k: (found[k]["value"] if k in found else None) for k in wanted}
        return out

    def beneath(self, brokers: Iterable[str], keys: Iterable[str]) -> Beneath:
        """What each broker ('broker:1') applies for `keys` while it has no value of its
        own, and from where: the cluster-wide dynamic default (broker resource "") or its
        server.properties; a key with only Kafka's built-in default is left out. Read from
        DescribeConfigs' synonyms (kafka-python cannot describe the resource "")."""
        from kafka.admin import ConfigResource, ConfigResourceType

        res, wanted = list(brokers), list(keys)
        if not res or not wanted:
            return {}
        with _calling("DescribeConfigs", self.admin):
            reply = self.admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, split(r)[1], dict.fromkeys(wanted))
                 for r in res], include_synonyms=True, config_filter="all")
        out: Beneath = {}
        for r in res:
            found = reply.get("broker", {}).get(split(r)[1], {})
            for key in wanted:
                below = inherited((found.get(key) or {}).get("synonyms") or [])
                if below is not None:
                    out.setdefault(r, {})[key] = below
        return out

    def cordon_config(self, broker: int) -> CordonConfig:
        """The broker's `cordoned.log.dirs`: its own dynamic value and what lies beneath
        (read with synonyms: the effective value alone cannot say what to put back)."""
        from kafka.admin import ConfigResource, ConfigResourceType

        with _calling("DescribeConfigs", self.admin):
            reply = self.admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, str(broker), {cordon.KEY: None})],
                include_synonyms=True, config_filter="all")
        found = reply.get("broker", {}).get(str(broker), {}).get(cordon.KEY)
        return CordonConfig.from_synonyms((found or {}).get("synonyms") or [])

    def cordoned_dirs(self, broker: int) -> set[str]:
        """The broker's dirs DescribeLogDirs v5 says are cordoned (none before 4.3), asked
        at the broker's own version (`core.api_support.cordoned_dirs`)."""
        from core.api_support import cordoned_dirs

        with _calling(f"DescribeLogDirs of broker {broker}", self.admin):
            found = cordoned_dirs(self.admin, broker)
            if found is not None:
                return found
            (reply,) = self.admin.describe_log_dirs(brokers=[broker])
        return {d["log_dir"] for d in reply["log_dirs"] if d.get("is_cordoned")}

    def metadata_level(self) -> int | None:
        """The finalised metadata.version feature level; None where there is none
        (ZooKeeper mode)."""
        with _calling("ApiVersions (features)", self.admin):
            features = self.admin.describe_features()
        return finalized_level(features)

    # --- changes ----------------------------------------------------------------------

    def alter_configs(self, configs: Configs) -> None:
        """Incremental alter: set each value, delete each None; nothing else is touched."""
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

        if not configs:
            return
        kinds = {"broker": ConfigResourceType.BROKER, "topic": ConfigResourceType.TOPIC}
        resources = []
        for r, keys in sorted(configs.items()):
            kind, name = split(r)
            ops = {k: (AlterConfigOp.DELETE, None) if v is None else (AlterConfigOp.SET, v)
                   for k, v in keys.items()}
            resources.append(ConfigResource(kinds[kind], name, ops))
        # The throttle rates are dynamic configs the broker does not list as such.
        with _calling("IncrementalAlterConfigs", self.admin):
            reply = self.admin.alter_configs(resources, raise_on_unknown=False,
                                             incremental=True)
        failed = [f"{kind}:{name}: {result}" for kind, by_name in reply.items()
                  for name, result in by_name.items() if result != "OK"]
        if failed:
            raise ClusterError("altering configs failed: " + "; ".join(failed))

    def reassign(self, targets: Mapping[TP, list[int] | None]) -> dict[TP, str]:
        """Submit (or with None, cancel) reassignments; returns errors by partition."""
        from kafka import TopicPartition

        if not targets:
            return {}
        with _calling("AlterPartitionReassignments", self.admin):
            reply = self.admin.alter_partition_reassignments(
                {TopicPartition(t, p): replicas for (t, p), replicas in targets.items()})
        out: dict[TP, str] = {}
        for tp, err in reply.items():
            name = _error_name(err)
            if name is not None:
                out[(tp.topic, tp.partition)] = name
        return out

    def move_dirs(self, moves: Mapping[tuple[str, int, int], str]) -> dict[tuple[str, int, int],
                                                                           str]:
        """AlterReplicaLogDirs; returns errors by replica (ReplicaNotAvailable included)."""
        if not moves:
            return {}
        with _calling("AlterReplicaLogDirs", self.admin):
            reply = self.admin.alter_replica_log_dirs(dict(moves))
        out: dict[tuple[str, int, int], str] = {}
        for tpr, err in reply.items():
            name = _error_name(err)
            if name is not None:
                out[(tpr.topic, tpr.partition, tpr.broker_id)] = name
        return out

    def elect_preferred(self, partitions: Iterable[TP]) -> dict[TP, str]:
        """Preferred leader elections; 'not needed' counts as done. Errors by partition."""
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        if not by_topic:
            return {}
        with _calling("ElectLeaders", self.admin):
            reply = self.admin.elect_leaders(PREFERRED, by_topic, raise_errors=False)
        out: dict[TP, str] = {}
        for result in reply.replica_election_results:
            for pr in result.partition_result:
                if pr.error_code not in (0, 84):  # 84: ELECTION_NOT_NEEDED
                    out[(result.topic, pr.partition_id)] = pr.error_message or str(pr.error_code)
        return out


def _tallies(partitions: Iterable[Mapping[str, Any]]
             ) -> tuple[dict[tuple[int, str], int], dict[int, int]]:
    """Bytes per (broker, dir) and partitions led per broker, over raw snapshot partitions."""
    dir_bytes: dict[tuple[int, str], int] = {}
    for p in partitions:
        for r in p["replicas"]:
            if r.get("log_dir") is not None:
                key = (r["broker"], r["log_dir"])
                dir_bytes[key] = dir_bytes.get(key, 0) + r["size_bytes"]
    return dir_bytes, leader_counts(p["leader"] for p in partitions)
