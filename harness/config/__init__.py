"""What to run: the settings declared once, the YAML spec, the plan of points, the rungs."""
