"""`harness tune`'s analysis, torch-free: the pipeline model (model.py; its profile from measured
runs, fit.py; its delivery recurrence, delivery.py), the confirmation search
(search.py; its judgement, judge.py; the grid's neighbours, neighbours.py; its trust in the model,
trust.py) and what tune prints (report.py). The run plumbing is harness/tune/."""
