"""Read result folders and answer from them: the Python API for notebooks. Never imports torch:
runs on a login node or a laptop with the base install (`pip install .` in a clone, no extra).

    import analysis

    frame = analysis.tidy(["results/grid"])   # one row per rank, rung and repeat: settings,
                                              # figures, node, node_type, versions, git commit
    loaded = analysis.load_results(["results/grid"])   # .rows (the rows alone), .problems
    summary = analysis.summarize(loaded.rows)          # one row per point and rung (by="gpu":
                                                       # per node type, with load_meta)
    tables = analysis.loader_tables(summary)           # the course's table per node
    recs = analysis.recommend(summary)                 # per node: best and cheapest tied
    more = analysis.undecided_points(summary)          # point id -> runs that would decide
    verdicts = analysis.ladder_verdicts(loaded.rows)   # the caching ladder, per point and host
    comparison = analysis.compare(["results/a"], ["results/b"])
    timeline = analysis.load_samples(point_folder, rank=0)   # the sampler's timeline, or None
    print(analysis.build_report(["results/grid"]).text)      # the report `harness report` prints

The names are imported here rather than on first use: two of them (`compare`, `recommend`)
are also the names of modules (analysis/grid/), and a lazily bound name is easily confused with
its module. The cost is pandas (about half a second), which
every use of the package pays anyway; matplotlib is imported only to draw.
"""

from analysis.aggregate import add_nodes, summarize
from analysis.export import tidy
from analysis.grid.compare import compare
from analysis.grid.recommend import recommend, undecided_points
from analysis.ladder.verdict import ladder_verdicts
from analysis.load import load_results
from analysis.meta import load_meta
from analysis.render.report import build_report
from analysis.render.tables import loader_tables
from analysis.samples import load_samples
from analysis.stragglers import find_stragglers

__all__ = [
    "add_nodes",
    "build_report",
    "compare",
    "find_stragglers",
    "ladder_verdicts",
    "load_meta",
    "load_results",
    "load_samples",
    "loader_tables",
    "recommend",
    "summarize",
    "tidy",
    "undecided_points",
]
