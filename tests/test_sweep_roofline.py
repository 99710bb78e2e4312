"""The sweep's roofline draws every level's roof (each level with a bandwidth, not only the
outermost), puts each point under each of them at its intensity through that level, and marks
points not proven optimal with hollow markers (filled: proven), with legend entries for both."""
import math

import pytest

from mapper.sweep.plots import write_plots

from test_sweep import swept_rows


def test_sweep_roofline_has_every_levels_roof_and_hollow_unproven_points(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import mapper.sweep.plots as plots
    points, rows = swept_rows(tmp_path, "m: [2, 4], n: 2, k: 4")
    real = plots.pyplot()
    figures = []

    class Keeping:                      # pyplot, keeping the figures the plots close
        def __getattr__(self, name):
            return getattr(real, name)

        def close(self, fig):
            figures.append(fig)

    monkeypatch.setattr(plots, "pyplot", lambda: Keeping())
    written = write_plots(points, rows, tmp_path / "plots")
    roofline = [f for f, p in zip(figures, written) if p.name.startswith("roofline-")]
    assert len(roofline) == 1 and (tmp_path / "plots" / "roofline-tiny.png").stat().st_size > 5_000
    ax = roofline[0].axes[0]
    labels = [ln.get_label() for ln in ax.get_lines()]
    # the tiny arch: DRAM 4 B/cycle, Buf 2 B/cycle (one instance each), RF without a bandwidth; 1 GHz
    assert labels == ["compute peak 4e+09 MAC/s", "DRAM roof 4e+09 B/s", "Buf roof 2e+09 B/s"]
    ok = [r for r in rows.values() if r["status"] == "ok"]
    scatters = ax.collections
    assert len(scatters) == 2 * len(ok)                 # each point under the DRAM and the Buf roof
    proven = {r["key"] for r in ok if r["optimal"]}
    assert proven and len(proven) < len(ok)             # joint proves its optima, greedy does not
    def is_hollow(c):
        face = c.get_facecolors()
        return len(face) == 0 or face[0][3] == 0

    filled = sum(1 for c in scatters if not is_hollow(c))
    hollow = sum(1 for c in scatters if is_hollow(c))
    assert (filled, hollow) == (2 * len(proven), 2 * (len(ok) - len(proven)))
    # every point at its own level's intensity: MACs / that level's traffic
    xs = sorted(round(c.get_offsets()[0][0], 9) for c in scatters)
    expected = sorted(round(r["macs"] / r["cost"]["level_details"][lv]["traffic_bytes"], 9)
                      for r in ok for lv in ("DRAM", "Buf"))
    assert xs == expected and all(math.isfinite(x) for x in xs)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "hollow: not proven" in legend and "filled: proven optimal" in legend
    assert {"greedy", "joint"} <= set(legend)
