"""Where points run: inline (this process), local (submitit subprocesses), slurm (job arrays)."""
