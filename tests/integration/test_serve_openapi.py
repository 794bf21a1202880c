"""serve's HTTP API fuzzed from its own OpenAPI description, against a real `selfheal serve`
on the sandbox: every operation gets generated requests (valid ones, and ones that break
the description), with the API token. No reply is a 5xx, every reply's status, media type
and body are what the description says, and nothing executes: the action waiting for
approval still waits."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sandbox.state import SandboxState
from tests.integration.serve_harness import bench, leader_tilted_topic, reorder_plan

pytestmark = pytest.mark.integration

EXAMPLES = 40  # per operation and generation mode
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, response_headers_conformance]
# Deciding on the waiting action would run it; the fuzz gives only reading operations its id.
READS = {("GET", "/actions/{action_id}"), ("GET", "/api/actions/{action_id}")}


def test_every_generated_request_is_answered_as_the_openapi_document_says(
        sandbox: SandboxState, tmp_path: Path) -> None:
    with bench(sandbox, tmp_path, '[actions]\nrebalance_leaders = "approve"\n') as b:
        serve = b.serve()
        topic = leader_tilted_topic(sandbox, "fuzz", [0, 1, 2], new_leader=1)
        action = b.action("rebalance_leaders", reorder_plan(topic, [1, 0, 2]),
                          "broker 1 should lead")
        b.propose(action)
        serve.wait_state(action.action_id, {"awaiting_approval"})
        link = serve.action(action.action_id)["approval_url"]
        token = link.rsplit("/", 1)[1]

        schema = schemathesis.openapi.from_url(serve.url + "/openapi.json")
        auth = {"Authorization": f"Bearer {b.token}"}
        counts: collections.Counter[tuple[str, str, int]] = collections.Counter()
        failures: list[str] = []
        unbreakable: list[str] = []
        operations = [result.ok() for result in schema.get_all_operations()]

        def fuzz(operation: Any, mode: GenerationMode, **fixed: Any) -> None:
            @settings(max_examples=EXAMPLES, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(mode, **fixed))
            def one(case: Any) -> None:
                response = case.call(base_url=serve.url, headers=auth, timeout=60)
                counts[(case.method, case.path, response.status_code)] += 1
                try:
                    case.validate_response(response, checks=CHECKS, headers=auth)
                except (AssertionError, BaseExceptionGroup) as exc:  # list every failure
                    failures.append(f"{case.method} {case.formatted_path} -> "
                                    f"{response.status_code}: {exc}"[:2000])

            try:
                one()
            except Unsatisfiable:
                # Only a path of free strings and no body: nothing can break the description.
                assert mode is GenerationMode.NEGATIVE, operation.path
                unbreakable.append(f"{operation.method.upper()} {operation.path}")

        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                fuzz(operation, mode)
            if (operation.method.upper(), operation.path) in READS:
                fuzz(operation, GenerationMode.POSITIVE,
                     path_parameters={"action_id": action.action_id})
            if operation.path == "/approve/{token}":
                fuzz(operation, GenerationMode.POSITIVE, path_parameters={"token": token})

        total = sum(counts.values())
        print(f"\nschemathesis: {len(operations)} operations, {total} requests; no request "
              f"breaking the description exists for {', '.join(unbreakable)}")
        for (method, path, status), n in sorted(counts.items()):
            print(f"  {method:4} {path:36} {status}: {n}")
        assert not failures, "\n\n".join(failures[:20])
        assert len(operations) >= 13
        assert {path for _, path, _ in counts} == {op.path for op in operations}
        assert not any(status >= 500 for _, _, status in counts)
        assert serve.alive()
        assert serve.action(action.action_id)["state"] == "awaiting_approval"
        status, page, _ = serve.http("GET", link.removeprefix(serve.url))
        assert status == 200 and "Approve and run" in page  # the link was never spent
