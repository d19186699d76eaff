"""What the harness and the analysis share, torch-free: the settings declared once
(`settings`), the ladder's rung names (`rungs`), the workload names a spec may give
(`workload_names`), a script's flags (`script_flags`), the spec's `expect:` section (`expect`),
YAML with its lines (`yaml_lines`), and a sweep folder's files: where each lives (`layout`), the
row schema and its writer (`rows`), the one reader (`reading`) and the one atomic writer
(`atomic`).

Both `harness` and `analysis` import it; it imports neither (tests/test_codebase.py), so that
the analysis, which runs on a login node or a laptop, never imports the harness."""
