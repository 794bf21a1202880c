"""Which partitions one member of a classic consumer group reads: the pure rules.

The group's own assignment (eager protocol: every member gives up everything before a new
generation starts) decides who *owns* a partition in a generation. A target assignment
never takes ownership away; it only lets an owner *lend* a partition to the member the
target names, and a borrower *give it back*. Each hand-over is written as the committed
offset of that partition in the group, with a small token in the commit's metadata:

    {"selfheal": 1, "g": <generation>, "owner": <member id>, "holder": <member id>}

Only the holder named by the latest token of the current generation reads the partition
(the owner when there is none); a holder stops reading before it writes a token naming
someone else, and a member starts reading only after it has seen a token naming it, from
that token's offset. So at every instant one member at most reads a partition, whatever
target versions the members happen to have read: members that disagree only leave a
partition lent and idle until their views agree. A new generation (any membership
change) makes every earlier token void, and the eager barrier makes every holder commit
and stop before any member of the new generation starts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from schemas import wire
from schemas.records import ConsumerAssignment
from schemas.registry import RecordError

TP = tuple[str, int]  # (topic, partition)

# Kafka keeps at most offset.metadata.max.bytes (4096 by default) of commit metadata.
TOKEN_MAX_BYTES = 4096
_TOKEN = "consumer-handoff-token"  # the name the decoder's refusals carry


@dataclass(frozen=True, slots=True)
class Token:
    """A hand-over of one partition within one generation of the group."""

    generation: int
    owner: str  # the member the group's assignment gave the partition to
    holder: str  # the member that may read it now

    def text(self) -> str:
        """The commit metadata that carries it."""
        return json.dumps({"selfheal": 1, "g": self.generation, "owner": self.owner,
                           "holder": self.holder}, separators=(",", ":"), ensure_ascii=False)


def parse_token(metadata: str | None) -> Token | None:
    """The token in a commit's metadata, or None when there is none (another
    application's metadata, an empty string, anything malformed: never an exception)."""
    if not metadata or not metadata.startswith('{"selfheal"'):
        return None
    try:
        value = wire.decode(_TOKEN, metadata, max_bytes=TOKEN_MAX_BYTES)
    except RecordError:
        return None
    if not isinstance(value, dict) or value.get("selfheal") != 1:
        return None
    gen, owner, holder = value.get("g"), value.get("owner"), value.get("holder")
    if (not isinstance(gen, int) or isinstance(gen, bool) or not isinstance(owner, str)
            or not isinstance(holder, str) or not owner or not holder):
        return None
    return Token(gen, owner, holder)


def generation_of(group_metadata: bytes) -> int:
    """The generation in librdkafka's serialised consumer-group metadata
    (`Consumer.consumer_group_metadata()`: ``CGMDv2:``, then the generation as a native
    32-bit integer). confluent-kafka offers the generation no other way."""
    if not isinstance(group_metadata, (bytes, bytearray)) or \
            not group_metadata.startswith(b"CGMDv2:") or len(group_metadata) < 11:
        raise ValueError(
            "cannot read the group generation from this confluent-kafka's consumer group "
            f"metadata ({bytes(group_metadata[:16])!r}...): the rack-aware consumer helper "
            "knows librdkafka's CGMDv2 format (confluent-kafka 2.x); use a 2.x release")
    return int.from_bytes(group_metadata[7:11], sys.byteorder, signed=True)


@dataclass(frozen=True, slots=True)
class TargetView:
    """A target as one member sees it: who reads each partition, and whether it applies."""

    readers: Mapping[TP, str]  # partition -> member, from the record
    applies: bool
    why: str  # why it applies or not, for logs and the docs' troubleshooting


def target_view(record: ConsumerAssignment | None, members: Set[str] | None, me: str,
                group_stable: bool, helpers: Set[str] | None = None) -> TargetView:
    """Whether ``record`` applies to the group as this member sees it now: the group is
    stable and has exactly the members the target was planned for, this one among them,
    every one of them runs this helper (``helpers``: those whose client id carries the
    helper's mark; None: all), and the target gives every partition to one member at
    most. A member without the helper would never read what is lent to it."""
    if record is None:
        return TargetView({}, False, "no target published for the group")
    readers: dict[TP, str] = {}
    for member, parts in record.assignment.items():
        for p in parts:
            tp = (p.topic, p.partition)
            if tp in readers:
                return TargetView({}, False, f"the target gives {p.topic}[{p.partition}] to "
                                             f"both {readers[tp]} and {member}; ignored")
            readers[tp] = member
    planned = record.membership()
    if members is None or not group_stable:
        return TargetView(readers, False, "the group is rebalancing or could not be "
                                          "described")
    if me not in planned:
        return TargetView(readers, False, f"this member ({me}) is not among the "
                                          f"{len(planned)} the target was planned for")
    if set(members) != planned:
        return TargetView(readers, False, f"the group has {len(members)} members now, not "
                                          f"the {len(planned)} the target was planned for")
    others = sorted(set(members) - set(helpers)) if helpers is not None else []
    if others:
        return TargetView(readers, False, f"{len(others)} member(s) do not run the helper "
                                          f"(first: {others[0]}); the whole group must opt in")
    return TargetView(readers, True, "the group has the members the target was planned for")


@dataclass(frozen=True, slots=True)
class Step:
    """What a member does next: the partitions it reads afterwards, its own partitions it
    lends (partition -> borrower) and the borrowed ones it gives back (-> owner)."""

    read: frozenset[TP]
    lend: dict[TP, str] = field(default_factory=dict)
    give_back: dict[TP, str] = field(default_factory=dict)


def step(me: str, generation: int, owned: Set[TP], tokens: Mapping[TP, Token],
         target: TargetView, hold_back: Set[tuple[TP, str]] = frozenset()) -> Step:
    """The rules, for one member at one moment of a generation.

    - An owned partition with no token of this generation, or one naming this member as
      holder, is this member's: it lends it when the target applies and names another
      member (unless that member gave it back lately: ``hold_back``), else reads it.
    - An owned partition lent to someone else is left alone: only its holder may hand it
      back, so the owner never reads while the borrower might.
    - A partition of another owner whose token of this generation names this member is
      read when the target applies and names this member too, else given back.
    """
    read: set[TP] = set()
    lend: dict[TP, str] = {}
    give_back: dict[TP, str] = {}
    readers = target.readers if target.applies else {}
    for tp in owned:
        token = tokens.get(tp)
        if token is not None and token.generation == generation and token.owner == me \
                and token.holder != me:
            continue  # lent: the holder decides when it comes back
        want = readers.get(tp)
        if want is not None and want != me and (tp, want) not in hold_back:
            lend[tp] = want
        else:
            read.add(tp)
    for tp, token in tokens.items():
        if tp in owned or token.generation != generation or token.holder != me \
                or token.owner == me:
            continue
        if readers.get(tp) == me:
            read.add(tp)
        else:
            give_back[tp] = token.owner
    return Step(frozenset(read), lend, give_back)
