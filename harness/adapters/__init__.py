"""One adapter per library whose loaders or data sets the harness measures (base.py: the
protocol; registry.py: the list the core asks, in order)."""
