"""``executor stats --plot``: the file type is checked up front; one minute of rows, one panel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from executor.recording.database import open_database
from executor.stats.command import stats_main
from executor.stats.plot import MINUTE_MS, build_figure, check_plot_path, minutes_spanned
from executor.stats.queries import Report, StatsError

START_MS = 1_796_049_480_000  # a minute boundary (2026-11-30T14:38:00Z)


def report_over(minutes: int) -> Report:
    """A report whose wake_recv rows fall in ``minutes`` consecutive minutes, 30 rows each."""
    report = Report("t.db", START_MS, None, None)
    report.series = {
        "wake_recv": [
            (START_MS + minute * MINUTE_MS + index * 1000, 0.03 + index / 1000)
            for minute in range(minutes)
            for index in range(30)
        ]
    }
    return report


@pytest.mark.parametrize("name", ["p.png", "p.svg", "p.pdf", "P.PNG"])
def test_supported_plot_files_pass(name: str) -> None:
    """PNG, SVG and PDF names (any case) are accepted."""
    check_plot_path(Path(name))


@pytest.mark.parametrize("name", ["p.txt", "p", "p.jpeg"])
def test_an_unsupported_plot_file_is_refused(name: str) -> None:
    """Any other suffix is refused in one line naming the file and the types that work."""
    with pytest.raises(StatsError) as raised:
        check_plot_path(Path(name))
    message = str(raised.value)
    assert message.startswith(f"--plot {name}: cannot write")
    assert "FILE.png" in message and "\n" not in message


def test_minutes_spanned_counts_distinct_minutes() -> None:
    """Rows in one minute span 1; rows across three minutes span 3; no rows span 0."""
    assert minutes_spanned(report_over(1).series) == 1
    assert minutes_spanned(report_over(3).series) == 3
    assert minutes_spanned({}) == 0


def _tick_labels(axes: Any) -> list[str]:
    axes.figure.canvas.draw()
    return [label.get_text() for label in axes.get_xticklabels() if label.get_text()]


def test_one_minute_of_rows_draws_the_cdf_alone() -> None:
    """Rows within one minute: one panel (the CDF), no per-minute panel of identical ticks."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    figure = build_figure(report_over(1))
    try:
        assert len(figure.axes) == 1
        assert figure.axes[0].get_title() == "latency CDF per stage"
    finally:
        plt.close(figure)


@pytest.mark.parametrize("minutes", [2, 3, 5, 30, 600, 3000])
def test_several_minutes_draw_the_per_minute_panel_with_distinct_ticks(minutes: int) -> None:
    """Rows over several minutes: two panels, and the time axis's ticks sit on whole minutes,
    each label once (never one minute repeated at sub-minute ticks), a few of them."""
    pytest.importorskip("matplotlib")
    import matplotlib.dates as dates
    import matplotlib.pyplot as plt

    figure = build_figure(report_over(minutes))
    try:
        assert len(figure.axes) == 2
        labels = _tick_labels(figure.axes[1])
        assert len(labels) == len(set(labels)) >= 2, labels
        assert len(labels) <= 10, labels
        ticks = [dates.num2date(tick) for tick in figure.axes[1].get_xticks()]
        assert all(tick.second == 0 and tick.microsecond == 0 for tick in ticks), ticks
    finally:
        plt.close(figure)


def test_stats_refuses_a_bad_plot_file_before_reporting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``stats --plot p.txt`` prints no report: one line on stderr, exit 2, nothing written."""
    database = tmp_path / "t.db"
    connection, _ = open_database(database)
    connection.close()
    target = tmp_path / "p.txt"
    assert stats_main(["--telemetry-db", str(database), "--plot", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "--plot" in captured.err and "p.txt" in captured.err
    assert not target.exists()
