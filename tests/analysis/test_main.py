from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.__main__ import add_compare_arguments, add_report_arguments, compare_main, main, report_main

REPO = Path(__file__).resolve().parents[2]


def test_the_report_prints_tables_and_the_recommendation(
    real_sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(real_sweep)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("node node-a\nsame in every row: batch_size 8, persistent_workers False,")
    assert main([str(real_sweep), "--wide"]) == 0
    assert capsys.readouterr().out.startswith("node node-a\njobid  ")
    assert f"recommendation for node-b (grid/{real_sweep.name}):" in out


def test_html_goes_to_a_file(real_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main([str(real_sweep), "--format", "html", "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"report: {out} (3 point(s))\n"
    assert out.read_text().startswith("<!DOCTYPE html>")
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # shareable like any file the user makes


def test_an_unwritable_output_is_exit_2(
    real_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    assert main([str(real_sweep), "-o", str(tmp_path / "file" / "report.txt")]) == 2
    assert capsys.readouterr().err.startswith(f"harness: cannot write {tmp_path / 'file' / 'report.txt'}: ")


def test_no_rows_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 1
    assert f"{tmp_path}: no result rows (points/<id>/rank<k>.csv) under it" in capsys.readouterr().out


def test_a_host_cli_can_mount_both_verbs(
    real_sweep_pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """What harness/cli.py does: the argument sets on its own subparsers, the mains as handlers."""
    parser = argparse.ArgumentParser(prog="harness")
    verbs = parser.add_subparsers(dest="verb", required=True)
    add_report_arguments(verbs.add_parser("report"))
    add_compare_arguments(verbs.add_parser("compare"))
    before, after = real_sweep_pair
    assert report_main(parser.parse_args(["report", str(before), "--by", "gpu"])) == 0
    assert "node type cpu (nodes: node-a)" in capsys.readouterr().out
    assert compare_main(parser.parse_args(["compare", str(before), str(after)])) == 0
    assert "what changed from A to B:" in capsys.readouterr().out


def test_the_report_compare_and_html_run_without_torch(
    real_sweep_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    """A login node has no torch: block its import; every verb still answers."""
    before, after = real_sweep_pair
    page = tmp_path / "r.html"
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['torchvision'] = None\n"
        "from analysis.__main__ import main\n"
        f"assert main([{str(before)!r}, '--by', 'gpu']) == 0\n"
        f"assert main(['compare', {str(before)!r}, {str(after)!r}]) == 0\n"
        f"assert main([{str(before)!r}, '--format', 'html', '-o', {str(page)!r}]) == 0\n"
        "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "what changed from A to B:" in out.stdout and page.read_text().count("data:image/png") == 1
