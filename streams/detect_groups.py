"""Detection's consumer-group rules (a part of streams/detect.py's `_Step`): a group
reading across racks more than its KIP-881 plan would, members without client.rack, and
KIP-848 groups, which only their operator can steer."""

from __future__ import annotations

from streams.detect_types import (
    ASSIGN_CONSUMERS,
    PAGE,
    SNAPSHOT,
    ClusterState,
    Decision,
    DetectSettings,
    GroupFacts,
    GroupSpell,
    SnapshotSeen,
)


class GroupRules:
    """The consumer-group rules, mixed into detection's `_Step`."""

    settings: DetectSettings
    cluster_id: str
    state: ClusterState
    decisions: list[Decision]

    def consumers(self, seen: SnapshotSeen) -> None:
        """A group reading on its own racks `consumer_locality_margin` less than its
        KIP-881 plan would, for the window: one assign_consumers per membership and
        spell. Members without client.rack, which no assignment can place: one page
        naming them and the line to set, once per member. A KIP-848 group: a page with
        what the operator can set instead (`broker_assigned`)."""
        state, groups = self.state, seen.facts.groups
        window = self.settings.consumer_locality_window_ms
        for name in [g for g in state.consumers if g not in groups]:
            del state.consumers[name]
        for name in [g for g in state.rackless if g not in groups]:
            del state.rackless[name]
        for name, facts in sorted(groups.items()):
            if not facts.stable:
                continue  # mid-rebalance: judged once the group settles
            self.rackless(seen, name, facts)
            if facts.broker_assigned:
                self.broker_assigned(seen, name, facts)
                continue
            if not self.lagging(facts):
                state.consumers.pop(name, None)
                continue
            spell = state.consumers.get(name)
            if spell is None or spell.membership != facts.membership:
                spell = state.consumers[name] = GroupSpell(seen.time, facts.membership)
            if spell.proposed or seen.time - spell.since < window:
                continue
            spell.proposed = True
            assert facts.ratio is not None and facts.planned is not None
            lasted = (seen.time - spell.since) / 1000
            why = f"; {facts.diagnosis}" if facts.diagnosis else ""
            self.decisions.append(Decision(
                ASSIGN_CONSUMERS, self.cluster_id, seen.time, SNAPSHOT, None, None, seen.ref,
                (), f"consumer group {name} reads {facts.ratio:.0%} on its members' racks, "
                f"its KIP-881 {facts.strategy} plan {facts.planned:.0%}, for {lasted:.0f} s "
                f"now{why}", group=name))

    def lagging(self, facts: GroupFacts) -> bool:
        if facts.ratio is None or facts.planned is None or facts.planned <= facts.ratio:
            return False
        return facts.planned - facts.ratio >= self.settings.consumer_locality_margin - 1e-9

    def rackless(self, seen: SnapshotSeen, name: str, facts: GroupFacts) -> None:
        state = self.state
        if not facts.no_rack or not facts.racks:
            state.rackless.pop(name, None)  # all set, or a cluster without racks
            return
        spell = state.rackless.setdefault(name, GroupSpell(seen.time, facts.membership))
        new = [(m, c) for m, c in facts.no_rack if m not in spell.paged]
        if not new or seen.time - spell.since < self.settings.consumer_locality_window_ms:
            return
        spell.paged = sorted({*spell.paged, *(m for m, _ in new)})
        racks = ", ".join(facts.racks)
        who = "; ".join(f"member {m}" + (f" (client.id {c})" if c else "") for m, c in new)
        self.decisions.append(Decision(
            PAGE, self.cluster_id, seen.time, SNAPSHOT, None, None, seen.ref, (),
            f"consumer group {name}: {who} set(s) no client.rack, so no rack-aware "
            f"assignment (KIP-881) or follower fetching (KIP-392) can place it; add the line "
            f"client.rack=<rack> to its consumer config, with the rack of the machine it runs "
            f"on (the cluster's racks: {racks}), and restart it", group=name))

    def broker_assigned(self, seen: SnapshotSeen, name: str, facts: GroupFacts) -> None:
        """A KIP-848 group on a cluster with racks, for the window: below its KIP-881
        plan (one page per membership and spell), or with racks nobody can read (one
        page while the group lasts). Never an assign_consumers: nothing outside the group
        steers its assignment."""
        state = self.state
        judged = self.lagging(facts) if facts.racks_known else bool(facts.racks)
        if not judged:
            state.consumers.pop(name, None)
            return
        membership = facts.membership if facts.racks_known else ""
        spell = state.consumers.get(name)
        if spell is None or spell.membership != membership:
            spell = state.consumers[name] = GroupSpell(seen.time, membership)
        if spell.proposed or seen.time - spell.since < self.settings.consumer_locality_window_ms:
            return
        spell.proposed = True
        if facts.racks_known:
            assert facts.ratio is not None and facts.planned is not None
            how = (f"reads {facts.ratio:.0%} on its members' racks, a rack-aware "
                   f"assignment {facts.planned:.0%}")
        else:
            how = f"runs on a cluster with racks ({', '.join(facts.racks)})"
        self.decisions.append(Decision(
            PAGE, self.cluster_id, seen.time, SNAPSHOT, None, None, seen.ref, (),
            f"consumer group {name} {how}; {facts.diagnosis}", group=name))
