"""The README's performance tables are what ``benchmarks.readme`` renders from the results file.

The rendered cells are compared with values computed here from the numbers put in (by hand,
not by the renderer), and the README's block with the rendering of the committed
``benchmarks/results.json``, so the README cannot drift from the measurements.
"""

import json
from pathlib import Path

import pytest

from benchmarks import __main__ as bench_main
from benchmarks.readme import BEGIN, END, readme_block, render

ROOT = Path(__file__).resolve().parent.parent

INTEL = {"cpu": "Intel Xeon", "cores": 2, "torch": "2.13.0", "torch_threads": 2,
         "python": "3.11.7"}
AMD = {**INTEL, "cpu": "AMD EPYC"}


def _results(**areas):
    return {"machine": INTEL, "quick": False, "areas": areas}


def _cells(text, first):
    """The cells of the table row whose first cell is ``first``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in\n{text}")


def test_readme_holds_the_tables_of_the_committed_results():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count(BEGIN) == 1 and readme.count(END) == 1
    held = readme[readme.index(BEGIN):readme.index(END) + len(END)]
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text(encoding="utf-8"))
    assert held == readme_block(results), (
        "README.md's performance tables differ from benchmarks/results.json: replace the "
        "block between the markers by the output of `python -m benchmarks --readme`")


def test_operator_rows_show_ratio_and_time_to_three_digits():
    rows = [
        {"n": 512, "heads": 1, "dtype": "float64", "rho": 0.3, "method": "newton",
         "wall_s": 0.0014677, "ratio_to_softmax": 3.0955, "iterations": 4, "converged": True},
        {"n": 512, "heads": 1, "dtype": "float64", "rho": 0.9, "method": "newton",
         "wall_s": 0.0210, "ratio_to_softmax": 1224.78, "iterations": 5, "converged": True},
        {"n": 512, "heads": 1, "dtype": "float64", "rho": 0.3, "method": "sinkhorn",
         "wall_s": 0.84, "ratio_to_softmax": 69.251, "iterations": 400, "converged": False},
    ]
    text = render(_results(operators=rows))
    newton = _cells(text, "`newton`")
    # 3.0955 -> 3.10 (3 significant digits, the zero kept); 1.4677 ms -> 1.47 ms; ratios from
    # 1000 on as whole numbers: 1224.78 -> 1225; 21.0 ms keeps its zero.
    assert newton[1:] == ["float64", "1", "512", "3.10x (1.47 ms)", "1225x (21.0 ms)"]
    assert _cells(text, "`sinkhorn`")[4:] == ["69.3x (400 sweeps, not converged)", "—"]


def test_stream_and_masses_rows():
    stream = {"n": 65536, "rho": 1 / 3, "wall_s": 15.69, "peak_rss_above_baseline_bytes":
              21504000, "dense_float64_bytes": 65536**2 * 8}
    masses = [
        {"name": "exact", "setting": "W=512 n=1e+03 alpha=1.1", "n": 1000, "median_s": 0.0051},
        {"name": "exact", "setting": "W=512 n=1e+15 alpha=1.1", "n": 10**15,
         "median_s": 0.00493},
        {"name": "flatness", "setting": "exact alpha=1.1: t(1e15)/t(1e3)", "ratio": 0.9666},
    ]
    text = render(_results(operators=[stream], masses=masses))
    # 21504000 B = 20.508 MiB; 65536^2 * 8 B = 32 GiB exactly; rho 1/3 to 3 digits
    assert _cells(text, "65536") == ["65536", "0.333", "15.7 s", "20.5 MiB", "32.0 GiB"]
    assert _cells(text, "`exact`") == ["`exact`", "1.1", "5.10 ms", "4.93 ms", "0.97"]
    assert "| method | alpha | n = 1e3 | n = 1e15 |" in text


def test_each_machine_is_named_once_with_its_areas():
    margin = [{"name": "margin", "setting": "W=8", "median_s": 0.1, "repeats": 9}]
    e2e = [{"command": "paper_figs.py --out /tmp/tmpabc", "median_s": 12.7}]
    one = render({"machine": INTEL, "areas": {"margin": margin, "end_to_end": e2e}})
    assert one.count("Intel Xeon") == 1 and "(margin, end_to_end)" in one
    two = render({"machine": INTEL, "machine_by_area": {"margin": AMD},
                  "areas": {"margin": margin, "end_to_end": e2e}})
    assert two.count("AMD EPYC") == 1 and two.count("Intel Xeon") == 1
    assert "AMD EPYC, torch 2.13.0 (2 threads), Python 3.11.7 (margin)" in two
    # a temporary output directory is not part of the command a reader reruns
    assert "`python paper_figs.py --out DIR`" in two and "/tmp" not in two


def test_not_a_results_file_is_refused():
    with pytest.raises(ValueError, match="areas"):
        render({"machine": INTEL})
    # areas with nothing a table is made from: refused, not a README block of no tables
    for areas in ({}, {"bogus": [{"x": 1}]}, {"margin": []}):
        with pytest.raises(ValueError, match="no rows in any area"):
            render(_results(**areas))


def test_readme_option_refuses_results_with_no_table(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results(bogus=[{"x": 1}])))
    assert bench_main.main(["--readme", "--out", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "no rows in any area" in captured.err


def test_readme_option_prints_the_block_and_runs_nothing(tmp_path, capsys):
    results = _results(diagnose=[{"case": "t5-base", "heads": 24, "lengths": 5,
                                  "median_s": 0.0602, "runs": 7}])
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert bench_main.main(["--readme", "--out", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == readme_block(results)
    assert _cells(out, "`t5-base`") == ["`t5-base`", "24 heads x 5 lengths", "7", "60.2 ms"]
    assert json.loads(path.read_text()) == results  # read, never rewritten
    assert bench_main.main(["--readme", "--out", str(tmp_path / "missing.json")]) == 2


def test_diagnose_rows_of_every_kind_render():
    rows = [{"benchmark": "diagnose", "case": "bracket-check-32x32x4096", "median_s": 15.99,
             "runs": 1, "layers": 32, "heads": 32, "length": 4096, "cpu_s": 24.92},
            {"benchmark": "diagnose", "case": "naive-bracket-check-one-head",
             "median_s": 0.1451, "runs": 1, "heads": 1, "length": 4096},
            {"benchmark": "diagnose", "case": "import torch + transformers", "median_s": 8.32,
             "runs": 5},
            {"benchmark": "diagnose", "case": "ratio tiny-measure / import", "ratio": 1.0347}]
    text = render(_results(diagnose=rows))
    # 15.99 s -> 16.0 s and 24.92 s -> 24.9 s (3 significant digits, the zero kept)
    assert _cells(text, "`bracket-check-32x32x4096`")[1:] == [
        "32 layers x 32 heads, l = 4096", "1", "16.0 s (24.9 s CPU)"]
    assert _cells(text, "`naive-bracket-check-one-head`")[1:] == ["1 heads, l = 4096", "1",
                                                                   "145 ms"]
    assert _cells(text, "`import torch + transformers`")[1:] == ["", "5", "8.32 s"]
    assert "Ratios: tiny-measure / import: 1.03." in text


def test_a_row_the_table_cannot_be_made_from_is_refused_by_area(tmp_path, capsys):
    results = _results(diagnose=[{"heads": 24, "lengths": 5, "median_s": 0.06}])  # no case
    with pytest.raises(ValueError, match=r"area 'diagnose' cannot be rendered.*case"):
        render(results)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert bench_main.main(["--readme", "--out", str(path)]) == 2
    err = capsys.readouterr().err
    assert "diagnose" in err and len(err.strip().splitlines()) == 1


def test_cuda_operator_rows_render_with_their_device():
    rows = [{"case": "forward float32", "batch_heads": 64, "n": 4096, "rho": r, "ot_ms": 10.0 * i,
             "softmax_ms": 2.0, "ratio": 5.0 * i, "device": "NVIDIA H200"}
            for i, r in enumerate((0.3, 0.9), 1)]
    rows.append({"case": "accuracy float32", "batch_heads": 8, "n": 2048, "rho": 0.9,
                 "max_abs_error": 3.2e-7, "max_row_sum_error": 1.1e-7, "device": "NVIDIA H200"})
    out = render(_results(operators_cuda=rows))
    assert "on NVIDIA H200" in out
    assert _cells(out, "forward float32") == ["forward float32", "64", "4096", "5.00x (10.0 ms)",
                                              "10.0x (20.0 ms)"]
    assert _cells(out, "accuracy float32")[-2:] == ["3.20e-07", "1.10e-07"]
