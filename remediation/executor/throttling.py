"""An action's throttles: set once, what they replaced saved in its journal first, and
restored exactly, also by another executor after a crash (the journal says what is left).
A broker applies a dynamic config moments after the alter returns: a move submitted in
between runs unthrottled, and an action ended right after its restore leaves the throttle
on for a while (a full test run saw a cancelled action's broker still throttled), so
both `apply` and `restore` wait until each broker reports the value it was given.
An operator's values win: a lower rate found is kept, and a value changed while the action
ran (it no longer reads what the action set) is left as the operator made it."""

from __future__ import annotations

import time
from typing import Any

from remediation.executor import throttle
from remediation.executor.cluster import KafkaCluster
from remediation.executor.store import ActionStore

ACTOR = "executor"
THROTTLE_VISIBLE_SECONDS = 10.0


class Throttles:
    """The throttles of the actions one executor runs."""

    def __init__(self, store: ActionStore, cluster: KafkaCluster) -> None:
        self.store = store
        self.cluster = cluster

    def _journal(self, action_id: str) -> dict[str, Any]:
        row = self.store.get(action_id)
        assert row is not None  # actions are never deleted
        return dict(row.journal)

    def apply(self, action_id: str, kind: str, wanted: throttle.Configs) -> None:
        """Set throttles once per action, saving what was there first (in the journal)."""
        if not wanted:
            return
        known = dict(self._journal(action_id).get("throttles", {}))
        if kind in known:
            return  # set by an earlier step or an earlier executor
        keys = {k for keys in wanted.values() for k in keys}
        found = self.cluster.configs(wanted, keys)
        beneath = self.cluster.beneath(
            [r for r in wanted if throttle.split(r)[0] == "broker"], keys & throttle.RATES)
        target = throttle.merged(wanted, found, beneath)
        known[kind] = {"saved": throttle.saved_values(target, found), "set": target,
                       "restored": False}
        self.store.update_journal(action_id, throttles=known)
        self.cluster.alter_configs(throttle.changes(target, found))
        for line in throttle.kept(wanted, found, beneath):
            self.store.note(action_id, ACTOR, line)
        self.store.note(action_id, ACTOR, f"throttle set: {throttle.describe(target)}")
        self._await_brokers(action_id, target, "throttle")

    def _await_brokers(self, action_id: str, target: throttle.Configs, what: str) -> None:
        """Wait until each broker reports the values it was given (DescribeConfigs of a
        broker is answered by that broker); the ones that do not are named in the audit
        after the wait, and the action goes on."""
        brokers = {r: v for r, v in target.items() if throttle.split(r)[0] == "broker"}
        keys = {k for values in brokers.values() for k in values}
        deadline = time.monotonic() + THROTTLE_VISIBLE_SECONDS
        while brokers:
            found = self.cluster.configs(brokers, keys)
            brokers = {r: v for r, v in brokers.items()
                       if any(found[r].get(k) != value for k, value in v.items())}
            if not brokers or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if brokers:
            self.store.note(action_id, ACTOR, f"{what} not yet applied by "
                            f"{', '.join(sorted(brokers))} after "
                            f"{THROTTLE_VISIBLE_SECONDS:.0f} s; going on")

    def restore(self, action_id: str) -> None:
        """Put back every config this action's throttles replaced (once), and wait until
        each broker reports what was put back."""
        known = dict(self._journal(action_id).get("throttles", {}))
        put_back: throttle.Configs = {}
        down = _down_brokers(self.cluster)
        for kind, entry in known.items():
            if entry.get("restored"):
                continue
            # A dead broker takes no config change (every try fails, and the action could
            # never end): its rate is left, and named. It throttles nothing once the
            # topics' throttled-replica lists are put back, which go to the controller.
            left = {r: v for r, v in entry["saved"].items() if r in down}
            saved = {r: v for r, v in entry["saved"].items() if r not in left}
            saved = self._not_changed_since(action_id, saved, entry.get("set"))
            self.cluster.alter_configs(saved)
            known[kind] = {**entry, "restored": True, **({"left": left} if left else {})}
            self.store.update_journal(action_id, throttles=known,
                                      **({"throttles_left": True} if left else {}))
            restored = throttle.describe(saved)
            self.store.note(action_id, ACTOR, f"throttle removed, configs restored: {restored}")
            if left:
                self.store.note(action_id, ACTOR, "broker down, its throttle left as set "
                                f"until it returns, then put back: {throttle.describe(left)}")
            for res, keys in saved.items():
                put_back.setdefault(res, {}).update(keys)
        if put_back:
            self._await_brokers(action_id, put_back, "restored configs")

    def restore_left(self) -> None:
        """Put back, on each broker that is up again, what an ended action had to leave on
        it while it was down (once per broker; an operator's change since still wins)."""
        rows = self.store.with_throttles_left()
        if not rows:
            return
        up = self.cluster.up_brokers()  # read now: no action may be running to read it
        for row in rows:
            known = dict(row.journal.get("throttles", {}))
            still = False
            for kind, entry in known.items():
                left = entry.get("left") or {}
                back = {r: v for r, v in left.items() if r in up}
                if not back:
                    still = still or bool(left)
                    continue
                saved = self._not_changed_since(row.id, back, entry.get("set"))
                self.cluster.alter_configs(saved)
                self._await_brokers(row.id, saved, "restored configs")
                rest = {r: v for r, v in left.items() if r not in back}
                known[kind] = {**entry, "left": rest}
                still = still or bool(rest)
                what = throttle.describe(saved) or "nothing: the operator changed it since"
                self.store.note(row.id, ACTOR, f"{', '.join(sorted(back))} back: the throttle "
                                f"left on it put back: {what}")
            self.store.update_journal(row.id, throttles=known, throttles_left=still)

    def _not_changed_since(self, action_id: str, saved: throttle.Configs,
                           was_set: throttle.Configs | None) -> throttle.Configs:
        """`saved` without the keys an operator changed after the action set them (they
        no longer read what it set): theirs win, and the audit names each one."""
        if not was_set or not saved:
            return saved  # a journal from before "set" was recorded: restore as found
        keys = {k for values in saved.values() for k in values}
        now = self.cluster.configs(saved, keys)
        out: throttle.Configs = {}
        for res, values in saved.items():
            kind, name = throttle.split(res)
            for key, before in values.items():
                ours, current = was_set.get(res, {}).get(key), now.get(res, {}).get(key)
                if current != ours and current != before:
                    self.store.note(action_id, ACTOR, (
                        f"{kind} {name} {key} was changed to {_text(current)} while the action "
                        f"ran (it set {_text(ours)}); the operator's value stays (not put back "
                        f"to {_text(before)})"))
                    continue
                out.setdefault(res, {})[key] = before
        return out


def _text(value: str | None) -> str:
    if value is None:
        return "(unset)"
    return throttle.rate_text(value) if value.strip().isdigit() else value


def _down_brokers(cluster: KafkaCluster) -> set[str]:
    """'broker:N' of each broker the latest read found down."""
    view = getattr(cluster, "last_view", None)
    if view is None:
        return set()
    model = view.model
    return {f"broker:{b}" for b in model.brokers if b not in model.alive}
