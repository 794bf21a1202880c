"""bench/suite_times.py sums a JUnit report per module."""

from __future__ import annotations

from bench.suite_times import main, per_module

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.e2e.test_detect_loop" name="test_a" time="52.5"/>
<testcase classname="tests.e2e.test_detect_loop" name="test_b" time="7.5"/>
<testcase classname="tests.unit.test_plan.TestRange" name="test_c" time="0.25"/>
<testcase classname="tests.unit.test_plan" name="test_d" time="0.75"/>
</testsuite></testsuites>"""


def test_each_module_sums_its_tests_and_classes(tmp_path, capsys):
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    assert per_module(report) == {"tests/e2e/test_detect_loop.py": (60.0, 2),
                                  "tests/unit/test_plan.py": (1.0, 2)}
    assert main([str(report)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("tests/e2e/test_detect_loop.py")  # the slowest first
    assert "98.4%" in lines[1]


def test_no_report_says_how_to_get_one(tmp_path, capsys):
    assert main([str(tmp_path / "none.xml")]) == 2
    assert "run `make test` first" in capsys.readouterr().err
