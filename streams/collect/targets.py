"""Which broker each JMX exporter URL belongs to (pure: discovery results come in).

The exporter's own output names no broker, so the mapping must come from outside. In
order of trust:

1. ``<id>=<url>`` in ``[cluster] exporter_urls``: the operator said so.
2. A registered exporter source (`register_exporter_source`): the sandbox registers
   its state file, which records each broker's exporter port, and answers only when the
   monitored cluster is that sandbox.
3. Discovery: the brokers the Admin API lists; a plain URL belongs to the one broker
   whose advertised host is the URL's host. Two brokers on one host are ambiguous and
   the error says to write ``<id>=<url>``.

With no URLs at all, ``[collect] exporter_port`` turns every discovered broker into
``http://<host>:<port><path>``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from core.config import Config


class TargetError(ValueError):
    """An exporter URL entry that cannot be used; the message says how to write it."""


@dataclass(frozen=True)
class BrokerInfo:
    """A broker as discovery lists it."""

    id: int
    host: str
    rack: str | None


@dataclass(frozen=True)
class ExporterTarget:
    """One exporter endpoint to scrape, and the broker it reports on."""

    broker: int
    url: str


@dataclass(frozen=True)
class ExporterUrls:
    """``[cluster] exporter_urls`` split into operator-mapped and plain URLs."""

    mapped: tuple[ExporterTarget, ...]
    plain: tuple[str, ...]


def _check_url(url: str, entry: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(
            f"exporter URL {entry!r} is not an http(s) URL; write it as "
            "http://host:port/metrics or <broker id>=http://host:port/metrics")
    return url


def parse_exporter_urls(entries: Iterable[str]) -> ExporterUrls:
    """Split ``["1=http://a:7071/metrics", "http://b:7071/metrics"]``; `TargetError` names
    the bad entry (a non-numeric id, a non-http URL, a broker or URL given twice)."""
    mapped: list[ExporterTarget] = []
    plain: list[str] = []
    for entry in entries:
        head, sep, rest = entry.partition("=")
        if sep and "://" not in head:
            if not head.strip().isdigit():
                raise TargetError(
                    f"exporter URL entry {entry!r}: {head!r} is not a broker id; write "
                    "<broker id>=<url>, e.g. 1=http://kafka-1:7071/metrics")
            mapped.append(ExporterTarget(int(head), _check_url(rest.strip(), entry)))
        else:
            plain.append(_check_url(entry.strip(), entry))
    ids = [t.broker for t in mapped]
    twice = sorted({b for b in ids if ids.count(b) > 1})
    if twice:
        raise TargetError(f"broker {twice[0]} has two exporter URLs in [cluster] "
                          "exporter_urls; keep one")
    urls = [t.url for t in mapped] + plain
    repeated = sorted({u for u in urls if urls.count(u) > 1})
    if repeated:
        raise TargetError(f"exporter URL {repeated[0]} is listed twice in [cluster] "
                          "exporter_urls")
    return ExporterUrls(tuple(mapped), tuple(plain))


# A trusted record of which broker exports which URL, and each broker's rack: a layer
# above the product (the sandbox, from its state file) may register one. Each returns
# ({url: broker}, {broker: rack}), empty when it does not describe the configured cluster.
ExporterSource = Callable[[Config], tuple[dict[str, int], dict[int, str | None]]]
_EXPORTER_SOURCES: list[ExporterSource] = []


def register_exporter_source(source: ExporterSource) -> None:
    """Add ``source`` to what `known_exporters` asks (once per function)."""
    if source not in _EXPORTER_SOURCES:
        _EXPORTER_SOURCES.append(source)


def known_exporters(config: Config) -> tuple[dict[str, int], dict[int, str | None]]:
    """URL -> broker and broker -> rack from the registered sources, merged."""
    urls: dict[str, int] = {}
    racks: dict[int, str | None] = {}
    for source in _EXPORTER_SOURCES:
        more_urls, more_racks = source(config)
        urls.update(more_urls)
        racks.update(more_racks)
    return urls, racks


def resolve_targets(urls: ExporterUrls, known: Mapping[str, int],
                    brokers: Mapping[int, BrokerInfo] | None,
                    exporter_port: int | None = None,
                    exporter_path: str = "/metrics",
                    ) -> tuple[list[ExporterTarget], list[str]]:
    """The targets that can be scraped, and a problem line for each URL that cannot.

    ``known`` maps URLs to brokers from a trusted record (`known_exporters`); ``brokers``
    is the latest discovery, None when the cluster could not be asked (plain URLs
    outside ``known`` then wait for it).
    """
    targets = list(urls.mapped)
    problems: list[str] = []
    if not urls.mapped and not urls.plain:
        if exporter_port is None:
            problems.append(
                "no exporter to scrape: set [cluster] exporter_urls (<broker id>=<url>, ...) "
                "or [collect] exporter_port to scrape every discovered broker")
        elif brokers is None:
            problems.append("no broker list yet to build exporter URLs from "
                            "([collect] exporter_port); retrying discovery")
        else:
            targets = [
                ExporterTarget(b.id, f"http://{_host_in_url(b.host)}:{exporter_port}"
                                     f"{exporter_path}")
                for b in sorted(brokers.values(), key=lambda b: b.id)
            ]
        return targets, problems
    for url in urls.plain:
        if url in known:
            targets.append(ExporterTarget(known[url], url))
            continue
        if brokers is None:
            problems.append(f"cannot tell which broker exports {url} until the cluster "
                            "answers (discovery failed); retrying, or write it as "
                            "<broker id>=<url>")
            continue
        host = (urlsplit(url).hostname or "").lower()
        matches = sorted(b.id for b in brokers.values() if b.host.lower() == host)
        if len(matches) == 1:
            targets.append(ExporterTarget(matches[0], url))
        else:
            found = (f"brokers {', '.join(map(str, matches))} all run on {host}" if matches
                     else f"no broker advertises host {host}")
            problems.append(f"cannot tell which broker exports {url}: {found}; write it "
                            "as <broker id>=<url> in [cluster] exporter_urls")
    seen: dict[int, str] = {}
    unique = []
    for target in targets:
        if target.broker in seen:
            problems.append(f"broker {target.broker} has two exporters ({seen[target.broker]} "
                            f"and {target.url}); scraping only the first; fix "
                            "[cluster] exporter_urls")
            continue
        seen[target.broker] = target.url
        unique.append(target)
    return unique, problems


def _host_in_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host  # an IPv6 literal
