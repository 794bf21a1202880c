"""Which broker each exporter URL belongs to: operator mapping, sandbox record, host match."""

from __future__ import annotations

import pytest

from streams.collect.targets import (
    BrokerInfo,
    ExporterTarget,
    ExporterUrls,
    TargetError,
    parse_exporter_urls,
    resolve_targets,
)

A, B, C = ("http://kafka-a:7071/metrics", "http://kafka-b:7071/metrics",
           "http://kafka-c:7071/metrics")
BROKERS = {
    1: BrokerInfo(1, "kafka-a", "r1"),
    2: BrokerInfo(2, "kafka-b", "r2"),
    3: BrokerInfo(3, "kafka-b", "r3"),  # two brokers on one host
}


def test_entries_split_into_mapped_and_plain_urls():
    urls = parse_exporter_urls([f"1={A}", f" 2 = {B} ", C])
    assert urls.mapped == (ExporterTarget(1, A), ExporterTarget(2, B))
    assert urls.plain == (C,)


@pytest.mark.parametrize("entries, message", [
    ([f"one={A}"], "'one' is not a broker id; write <broker id>=<url>"),
    (["kafka-a:7071/metrics"], "is not an http(s) URL"),
    ([f"1={A}", f"1={B}"], "broker 1 has two exporter URLs"),
    ([A, f"2={A}"], f"exporter URL {A} is listed twice"),
])
def test_bad_entries_are_named_with_how_to_write_them(entries, message):
    with pytest.raises(TargetError) as info:
        parse_exporter_urls(entries)
    assert message in str(info.value)


def test_a_url_with_an_equals_sign_in_its_query_stays_a_plain_url():
    url = "http://kafka-a:7071/metrics?name[]=x"
    assert parse_exporter_urls([url]).plain == (url,)


def test_operator_mapping_and_sandbox_record_need_no_discovery():
    urls = ExporterUrls((ExporterTarget(7, A),), (B,))
    targets, problems = resolve_targets(urls, known={B: 8}, brokers=None)
    assert (targets, problems) == ([ExporterTarget(7, A), ExporterTarget(8, B)], [])


def test_a_plain_url_belongs_to_the_one_broker_on_its_host():
    targets, problems = resolve_targets(ExporterUrls((), (A,)), {}, BROKERS)
    assert (targets, problems) == ([ExporterTarget(1, A)], [])


def test_two_brokers_on_the_url_host_is_ambiguous_and_says_how_to_fix_it():
    targets, problems = resolve_targets(ExporterUrls((), (A, B)), {}, BROKERS)
    assert targets == [ExporterTarget(1, A)]
    (problem,) = problems
    assert f"cannot tell which broker exports {B}: brokers 2, 3 all run on kafka-b" in problem
    assert "<broker id>=<url>" in problem


def test_a_url_on_no_broker_host_is_a_problem():
    _, (problem,) = resolve_targets(ExporterUrls((), ("http://other:1/metrics",)), {},
                                    BROKERS)
    assert "no broker advertises host other" in problem


def test_plain_urls_wait_for_discovery():
    targets, (problem,) = resolve_targets(ExporterUrls((), (A,)), {}, None)
    assert targets == []
    assert "until the cluster answers" in problem


def test_without_urls_the_exporter_port_makes_one_target_per_discovered_broker():
    targets, problems = resolve_targets(ExporterUrls((), ()), {}, BROKERS, 9404, "/m")
    assert problems == []
    assert targets == [ExporterTarget(1, "http://kafka-a:9404/m"),
                       ExporterTarget(2, "http://kafka-b:9404/m"),
                       ExporterTarget(3, "http://kafka-b:9404/m")]


def test_an_ipv6_broker_host_is_bracketed_in_the_url():
    brokers = {1: BrokerInfo(1, "::1", None)}
    targets, _ = resolve_targets(ExporterUrls((), ()), {}, brokers, 9404)
    assert targets == [ExporterTarget(1, "http://[::1]:9404/metrics")]


def test_with_neither_urls_nor_exporter_port_nothing_can_be_scraped():
    targets, (problem,) = resolve_targets(ExporterUrls((), ()), {}, BROKERS)
    assert targets == []
    assert "set [cluster] exporter_urls" in problem and "[collect] exporter_port" in problem


def test_two_exporters_for_one_broker_keep_the_first_and_say_so():
    urls = ExporterUrls((ExporterTarget(1, C),), (A,))
    targets, (problem,) = resolve_targets(urls, {}, BROKERS)
    assert targets == [ExporterTarget(1, C)]
    assert f"broker 1 has two exporters ({C} and {A})" in problem
