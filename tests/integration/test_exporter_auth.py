"""The secured sandbox's exporter password, checked by jmx_exporter's own authenticator
(the agent jar's class, run in a JVM): every salt works, including the one in 16 whose
SHA-256 starts with a 0 nibble. Written in full, such a hash never matched (the agent
compares through BigInteger, without leading zeros), and every scrape of that sandbox got
401 Unauthorized until its start-up gave up after 180 s."""

from __future__ import annotations

import hashlib
import subprocess

import yaml

from sandbox import jars, jvm, secure

_CHECK = """
import io.prometheus.jmx.common.http.authenticator.MessageDigestAuthenticator;

public class CheckAuth {
    public static void main(String[] args) throws Exception {
        for (int i = 0; i + 2 < args.length; i += 3) {
            MessageDigestAuthenticator auth = new MessageDigestAuthenticator(
                "/", "user", args[i + 1], "SHA-256", args[i]);
            System.out.println(auth.checkCredentials("user", args[i + 2]));
        }
    }
}
"""


def _agent_accepts(tmp_path, cases: list[tuple[str, str, str]]) -> list[bool]:
    """For each (salt, hash, password): does the agent's authenticator let it in?"""
    source = tmp_path / "CheckAuth.java"
    source.write_text(_CHECK)
    args = [part for case in cases for part in case]
    done = subprocess.run([jvm.java(), "-Xmx64m", *jvm.SMALL_MACHINE_JVM_OPTIONS,
                           "-cp", str(jars.jmx_agent()), str(source), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [line == "true" for line in done.stdout.split()]


def test_the_agent_accepts_the_hash_for_salts_with_and_without_a_leading_zero(tmp_path):
    password = "correct horse"
    salts = [f"salt{i}" for i in range(200)]
    zero = [s for s in salts
            if hashlib.sha256(f"{s}:{password}".encode()).hexdigest().startswith("0")][:3]
    other = [s for s in salts if s not in zero][:3]
    assert len(zero) == 3  # ~12 of 200 salts give a leading 0 nibble
    cases = [(s, secure.exporter_hash(s, password), password) for s in zero + other]
    # the wrong password is refused with the same salts
    wrong = [(s, h, "wrong") for s, h, _ in cases]
    assert _agent_accepts(tmp_path, cases + wrong) == [True] * 6 + [False] * 6


def test_the_sandbox_exporter_config_lets_its_own_scrape_in(tmp_path):
    """What `prepare` writes, read back as the agent reads it, with the password file
    the sandbox's scrapes send."""
    state = secure.prepare(tmp_path, "sasl_ssl", principals=())
    basic = yaml.safe_load(state.exporter_config().read_text())[
        "httpServer"]["authentication"]["basic"]
    password = secure.exporter_password_file(state).read_text().strip()
    assert basic["username"] == secure.EXPORTER_USER
    assert _agent_accepts(tmp_path, [(basic["salt"], basic["passwordHash"], password)]) == [True]
