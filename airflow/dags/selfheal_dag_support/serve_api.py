"""A small client of `selfheal serve`'s JSON API: submit a signed action, read its state.

The DAGs change nothing in Kafka themselves: every change is an action that serve's
executor runs, so policy (auto or approve), limits, the breaker and the premise re-check
all apply to scheduled work as to detected work.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class ServeUnreachable(ConnectionError):
    """serve did not answer (down, wrong address); worth a retry."""


class ServeRefused(RuntimeError):
    """serve answered no for a reason a retry does not fix (token, signature, bad record)."""


class ServeClient:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        req = urllib.request.Request(
            f"{self.url}/api{path}", data=body, method=method,
            headers={"Authorization": f"Bearer {self.token}",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            text = err.read().decode(errors="replace")
            try:
                return err.code, json.loads(text)
            except ValueError:
                return err.code, {"error": text[:500]}
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServeUnreachable(
                f"selfheal serve at {self.url} is not reachable ({reason}); nothing was "
                "submitted. Start it (`selfheal serve`, the one executor of the cluster) or "
                "point the Airflow connection selfheal_serve at the one that runs, then clear "
                "this task") from None

    def submit(self, signed_record: bytes) -> dict[str, Any]:
        """POST /api/actions; {"action_id", "url", ...} once serve took it."""
        status, body = self._call("POST", "/actions", signed_record)
        if status == 202:
            return dict(body)
        message = body.get("error", body) if isinstance(body, dict) else body
        if status in (401, 403):
            raise ServeRefused(
                f"serve at {self.url} refused the action ({status}): {message}. Check that "
                "the token (connection selfheal_serve) is serve's [serve] api_token and that "
                "the signing key is serve's [cluster] action_signing_key")
        if status in (400, 404, 413):
            raise ServeRefused(f"serve at {self.url} refused the action ({status}): {message}")
        raise ServeUnreachable(f"serve at {self.url} answered {status}: {message}; try again")

    def show(self, action_id: str) -> dict[str, Any] | None:
        """GET /api/actions/<id>; None while serve's intake has not stored it yet."""
        status, body = self._call("GET", f"/actions/{action_id}")
        if status == 404:
            return None
        if status != 200:
            raise ServeRefused(f"serve at {self.url} answered {status} for action "
                               f"{action_id[:12]}: {body}")
        return dict(body)
