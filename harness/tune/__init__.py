"""`harness tune SPEC`, one concept a module: the driver (driver.py: profile, predict, confirm),
one tune's sweep folder and rounds (rounds.py), the profile's points and fit (profile.py), what
tune.json holds (summary.py) and the verb (verb.py). The model, the search and the report are
analysis/tune/ (torch-free: harness imports analysis, never the other way)."""
