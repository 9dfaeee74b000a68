"""``deploy/``: the systemd unit fits the executor; the dashboard uses only served metrics."""

from __future__ import annotations

import configparser
import contextlib
import dataclasses
import itertools
import json
import re
import shlex
import signal
import sqlite3
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from executor import cli, logs, telemetry
from executor.exchange.protocols import RESOLUTION_TIMEOUT_S
from executor.recording.counting.metrics import STOP_TIMEOUT_S
from executor.server import DEFAULT_GRACE_S
from executor.wire.socket_access import parse_socket_mode
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, metrics_port, request_all

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "trio-executor.service"
DASHBOARD = ROOT / "deploy" / "grafana" / "trio-executor.json"
OPERATIONS = ROOT / "docs" / "operations" / "deployment.md"

GROUP_CREATED = re.compile(r"^ +sudo groupadd --system (\S+)", flags=re.MULTILINE)
GROUP_JOINED = re.compile(r"^ +sudo usermod -aG (\S+) POLLER_USER", flags=re.MULTILINE)
SOCKET_FLAGS = re.compile(r"--socket-mode (\d+) --socket-group ([\w-]+)")
ANOTHER_USER = "**A poller running as another user.**"
SAME_USER = "**A poller running as the same user**"
SYSTEMD_SECTION = "## Run it under systemd"
UNIT_TABLE = "| setting | value | why |"

METRIC_NAME = re.compile(r"\b(?:trio_executor|python_gc)_[a-z0-9_]+")
"""A metric the executor serves: its own, or the interpreter's collections (``python_gc_*``)."""
STAGE_SELECTOR = re.compile(r'stage(=~|=)"([^"]+)"')
METRIC_SELECTOR = re.compile(r"\b((?:trio_executor|python_gc)_[a-z0-9_]+)(\{[^}]*\})?")
RANGE = re.compile(r"\[([^\]]*)\]")
VARIABLE_MATCHERS = ('job=~"$job"', 'instance=~"$instance"')
"""What every selector carries, so that one dashboard shows any executor Prometheus scrapes."""

HALTED_STATE_METRICS = {
    "trio_executor_telemetry_audit_unavailable",
    "trio_executor_telemetry_audit_outages_total",
    "trio_executor_refused_audit_total",
    "trio_executor_reconciled_total",
    "trio_executor_reconcile_failed_total",
    "trio_executor_presigned_total",
    "trio_executor_signed_inline_total",
}
"""The halted state, reconciliation and signing ahead: each has a panel (issue 23, item 7)."""

EXCHANGE_HALTS_METRICS = {
    "trio_executor_order_group_triggered",
    "trio_executor_trading_paused",
    "trio_executor_refused_order_group_total",
    "trio_executor_refused_paused_total",
}
"""The exchange's halts (its trigger of the order group, its pauses): each in a panel (issue 36)."""


# ---------------------------------------------------------------- the systemd unit


def unit(text: str | None = None) -> configparser.RawConfigParser:
    """The unit file (or ``text``, a unit), parsed (``\\`` continuations joined)."""
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    unit_text = UNIT.read_text() if text is None else text
    parser.read_string(unit_text.replace("\\\n", " "))
    return parser


def exec_start_args(unit_text: str | None = None) -> list[str]:
    """ExecStart's arguments after the program, with the specifiers of a system unit filled in."""
    service = unit(unit_text)["Service"]
    text = service["ExecStart"]
    for specifier, value in (("%t", "/run"), ("%S", "/var/lib"), ("%E", "/etc")):
        text = text.replace(specifier, value)
    return shlex.split(text)[1:]


def test_unit_is_a_notify_service_with_its_directories(monkeypatch: pytest.MonkeyPatch) -> None:
    """Type=notify, the socket under RuntimeDirectory and the database under StateDirectory."""
    service = unit()["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    args = exec_start_args()
    # The group exists where the unit is installed (the guide creates it), not here.
    monkeypatch.setattr(cli, "_socket_group", lambda text: (4242, text))
    parsed = cli.build_parser().parse_args(args)  # the executor's own parser accepts them
    assert parsed.command == "serve"
    assert parsed.socket == Path("/run") / service["RuntimeDirectory"] / "executor.sock"
    assert parsed.telemetry_db.parent == Path("/var/lib") / service["StateDirectory"]
    assert parsed.kill_switch.parent == Path("/var/lib") / service["StateDirectory"]
    assert parsed.env_file.parent == Path("/etc") / service["ConfigurationDirectory"]


def test_unit_stop_timeout_covers_the_longest_orderly_shutdown() -> None:
    """TimeoutStopSec is longer than every bounded wait of a shutdown with the default grace."""
    service = unit()["Service"]
    assert service["KillMode"] == "mixed"  # SIGTERM to the executor alone, SIGKILL to the rest
    assert service["KillSignal"] == "SIGTERM"
    longest = (
        DEFAULT_GRACE_S
        + RESOLUTION_TIMEOUT_S
        + telemetry.DRAIN_TIMEOUT_S
        + telemetry.CLOSE_TIMEOUT_S
        + STOP_TIMEOUT_S
        + logs.FLUSH_TIMEOUT_S
    )
    assert float(service["TimeoutStopSec"]) > longest


def test_unit_does_not_restart_a_configuration_error() -> None:
    """A configuration error (exit 2) is not restarted; a runtime failure is."""
    service = unit()["Service"]
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == str(cli.EXIT_USAGE)


def test_unit_hardening() -> None:
    """The hardening the issue asks for is on, with the state and runtime directories writable."""
    service = unit()["Service"]
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"  # RuntimeDirectory/StateDirectory stay writable
    assert service["PrivateTmp"] == "yes"
    assert "ReadOnlyPaths" not in service


@dataclasses.dataclass(frozen=True)
class PollerSetup:
    """What the guide tells an operator to set up for a poller running as another user."""

    group: str
    socket_mode: str
    runtime_directory_mode: str


def paragraph(text: str, opening: str) -> str:
    """The paragraph of ``text`` that begins with ``opening``, on one line."""
    start = text.index(opening)
    return " ".join(text[start:].split("\n\n", 1)[0].split())


def unit_table(operations: str) -> dict[str, str]:
    """the guide's table of the unit's settings: each setting cell to its value cell, both
    without backquotes."""
    table = operations[operations.index(UNIT_TABLE) :].split("\n\n", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in table.splitlines()[2:]]
    return {row[0].strip().replace("`", ""): row[1].strip().replace("`", "") for row in rows}


def documented_poller_setup(operations: str) -> PollerSetup:
    """The poller's group, the socket's mode and the runtime directory's mode as the guide
    gives them, once its install commands, its prose and its table of the unit agree on them."""
    (created,) = GROUP_CREATED.findall(operations)
    (joined,) = GROUP_JOINED.findall(operations)
    ((prose_mode, prose_group),) = SOCKET_FLAGS.findall(paragraph(operations, ANOTHER_USER))
    rows = unit_table(operations)
    (flags,) = [setting for setting, value in rows.items() if value == "in ExecStart"]
    ((table_mode, table_group),) = SOCKET_FLAGS.findall(flags)
    (supplementary,) = [
        setting.partition("=")[2] for setting in rows if setting.startswith("SupplementaryGroups=")
    ]
    assert created == joined == prose_group == table_group == supplementary
    assert prose_mode == table_mode
    systemd = operations[operations.index(SYSTEMD_SECTION) :]
    assert f"SupplementaryGroups={created}" in paragraph(systemd, SAME_USER)  # what to remove
    return PollerSetup(created, prose_mode, rows["RuntimeDirectoryMode"])


def poller_problems(unit_text: str, setup: PollerSetup) -> list[str]:
    """Where the unit ``unit_text`` differs from ``setup``: the two socket flags in ExecStart, the
    group among SupplementaryGroups, RuntimeDirectoryMode (empty when it does not)."""
    service = unit(unit_text)["Service"]
    args = exec_start_args(unit_text)
    problems: list[str] = []
    for flag, wanted in (("--socket-mode", setup.socket_mode), ("--socket-group", setup.group)):
        given = [value for name, value in itertools.pairwise(args) if name == flag]
        if given != [wanted]:
            problems.append(f"ExecStart gives {flag} {given}, not [{wanted!r}]")
    if setup.group not in service.get("SupplementaryGroups", "").split():
        problems.append(f"the executor is not put in {setup.group} (SupplementaryGroups)")
    if service.get("RuntimeDirectoryMode") != setup.runtime_directory_mode:
        problems.append(f"RuntimeDirectoryMode is not {setup.runtime_directory_mode}")
    return problems


def test_unit_lets_a_poller_under_another_user_connect() -> None:
    """The unit carries what the guide tells an operator to set up for a poller under another
    user: the socket's mode and group in ExecStart, the executor in that group, and a runtime
    directory the poller can pass through but not list."""
    setup = documented_poller_setup(OPERATIONS.read_text())
    assert poller_problems(UNIT.read_text(), setup) == []
    socket_mode = parse_socket_mode(setup.socket_mode)  # the executor accepts it
    assert socket_mode & 0o060 == 0o060  # the group may connect (write) ...
    directory_mode = int(setup.runtime_directory_mode, 8)
    # ... and, in neither the unit's user nor its group, passes the folder as "other".
    assert directory_mode & 0o001 and not directory_mode & 0o004


@pytest.mark.parametrize(
    ("line", "replacement"),
    [
        ("--socket-mode 0660 \\", ""),
        ("--socket-group trio-poller \\", ""),
        ("SupplementaryGroups=trio-poller", ""),
        ("RuntimeDirectoryMode=0711", ""),
        ("RuntimeDirectoryMode=0711", "RuntimeDirectoryMode=0750"),  # the unit before the fix
    ],
)
def test_the_poller_check_sees_a_line_missing(line: str, replacement: str) -> None:
    """Negative twin: the unit with one of the poller's lines removed (or the runtime directory
    back at 0750) is found wanting."""
    lines = UNIT.read_text().splitlines()
    assert sum(text.strip() == line for text in lines) == 1
    changed = "\n".join(replacement if text.strip() == line else text for text in lines) + "\n"
    assert poller_problems(changed, documented_poller_setup(OPERATIONS.read_text())) != []


# ---------------------------------------------------------------- the dashboard


def dashboard() -> dict[str, Any]:
    """The dashboard document."""
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return document


def dashboard_panels() -> list[dict[str, Any]]:
    """Every panel that draws something (rows only group them)."""
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def dashboard_expressions() -> list[str]:
    """Every PromQL expression of every panel."""
    panels = dashboard_panels()
    expressions = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    assert expressions and all(panel.get("targets") for panel in panels)
    return expressions


def variable_queries() -> dict[str, str]:
    """The query of each query variable, by name."""
    return {
        variable["name"]: variable["query"]["query"]
        for variable in dashboard()["templating"]["list"]
        if variable["type"] == "query"
    }


def selector_problems(expression: str) -> list[str]:
    """What keeps ``expression`` from following the dashboard's rules: a metric selector without
    the job and instance variables, or a range window other than ``$__rate_interval``."""
    problems = [
        f"{name} without {matcher}"
        for name, labels in METRIC_SELECTOR.findall(expression)
        for matcher in VARIABLE_MATCHERS
        if matcher not in labels
    ]
    problems += [
        f"window [{window}]" for window in RANGE.findall(expression) if window != "$__rate_interval"
    ]
    return problems


def test_every_query_uses_the_variables_and_the_rate_interval() -> None:
    """Each selector of each panel's query filters on ``$job`` and ``$instance``, and every range
    window is ``$__rate_interval``."""
    problems = {
        expression: found
        for expression in dashboard_expressions()
        if (found := selector_problems(expression))
    }
    assert problems == {}


def test_the_rule_check_sees_a_query_that_breaks_it() -> None:
    """Negative twin: a hard-coded window and a selector missing a variable are both found."""
    assert selector_problems('rate(trio_executor_x_total{job=~"$job"}[1m])') == [
        'trio_executor_x_total without instance=~"$instance"',
        "window [1m]",
    ]
    assert selector_problems('sum(trio_executor_y{stage="a"})') == [
        'trio_executor_y without job=~"$job"',
        'trio_executor_y without instance=~"$instance"',
    ]


def test_the_job_and_instance_variables_come_from_the_executor() -> None:
    """``job`` and ``instance`` are query variables over an executor metric, the instances of
    the chosen jobs, from the dashboard's Prometheus, any number of each selectable."""
    queries = variable_queries()
    assert set(queries) == {"job", "instance"}
    assert re.fullmatch(r"label_values\(trio_executor_\w+, job\)", queries["job"])
    assert re.fullmatch(
        r'label_values\(trio_executor_\w+\{job=~"\$job"\}, instance\)', queries["instance"]
    )
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == "${DS_PROMETHEUS}"
            assert variable["multi"] and variable["includeAll"]


def test_panels_are_laid_out_in_rows_without_overlap() -> None:
    """The dashboard opens with a row, each panel sits below its row and above the next one, no
    two panels overlap, and ids are unique, so a new row can be added below the last."""
    panels = dashboard()["panels"]
    assert panels[0]["type"] == "row"
    row_top = -1
    for panel in panels:
        position = panel["gridPos"]
        if panel["type"] == "row":
            assert position["y"] > row_top and position["w"] == 24 and not panel["collapsed"]
            row_top = position["y"]
        else:
            assert position["y"] > row_top, panel["title"]
    cells = [
        (x, y)
        for panel in panels
        for x in range(panel["gridPos"]["x"], panel["gridPos"]["x"] + panel["gridPos"]["w"])
        for y in range(panel["gridPos"]["y"], panel["gridPos"]["y"] + panel["gridPos"]["h"])
    ]
    assert len(cells) == len(set(cells)), "two panels overlap"
    assert all(0 <= x < 24 for x, _ in cells)
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    rows = [panel for panel in panels if panel["type"] == "row"]
    assert len(rows) >= 6 and panels[-1]["gridPos"]["y"] > rows[-1]["gridPos"]["y"]


Sample = tuple[str, dict[str, str], float]


def scrape(port: int) -> list[Sample]:
    """Every sample of ``/metrics``: its name, labels and value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def orders_by_status(samples: list[Sample]) -> dict[str, int]:
    """``trio_executor_orders_total`` by status, the statuses counted at least once."""
    counts: dict[str, int] = {}
    for name, labels, value in samples:
        if name == "trio_executor_orders_total" and value:
            counts[labels["status"]] = int(value)
    return counts


def test_every_metric_the_dashboard_uses_is_served(spawner: Spawner, short_dir: Path) -> None:
    """Each name (and each stage label value) in the dashboard's queries is in a live scrape, and
    the orders-by-status counter agrees with orders_fired."""
    socket_path = short_dir / "x.sock"
    executor = spawner.serve(
        socket_path,
        short_dir / "t.db",
        "--metrics",
        "127.0.0.1:0",
        "--log-format",
        "json",
        "--exchange",
        "fake",
    )
    wakes = [make_wake("dash-1"), make_wake("dash-2", exchange_index=0)]  # refused, then placed
    assert [ack.status for ack in request_all(socket_path, wakes)] == ["accepted"] * 2
    port = metrics_port(executor)
    deadline = time.monotonic() + 20
    while sum(orders_by_status(samples := scrape(port)).values()) < len(wakes):
        assert time.monotonic() < deadline, orders_by_status(samples)
        time.sleep(0.05)
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    with contextlib.closing(sqlite3.connect(short_dir / "t.db")) as db:
        written = dict(db.execute("SELECT status, COUNT(*) FROM orders_fired GROUP BY status"))
    assert orders_by_status(samples) == written  # the metric counts what the audit trail holds
    assert set(written) == {"rejected", "filled"}
    served = {name for name, _, _ in samples}
    stages = {labels["stage"] for _, labels, _ in samples if "stage" in labels}
    used: set[str] = set()
    for expression in [*dashboard_expressions(), *variable_queries().values()]:
        names = set(METRIC_NAME.findall(expression))
        assert names, expression
        used |= names
        for operator, value in STAGE_SELECTOR.findall(expression):
            wanted = value.split("|") if operator == "=~" else [value]
            assert set(wanted) <= stages, (expression, stages)
    assert used - served == set(), sorted(used - served)
    assert "trio_executor_no_such_metric_total" not in served  # the check can fail
    assert {"trio_executor_accepted_total", "trio_executor_latency_seconds_bucket"} <= used
    assert sorted(HALTED_STATE_METRICS - used) == []
    assert sorted(EXCHANGE_HALTS_METRICS - used) == []
