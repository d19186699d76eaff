"""`harness tune SPEC`: profile, predict, confirm (driver.py); the model, the search and the
report are analysis/tune/."""
