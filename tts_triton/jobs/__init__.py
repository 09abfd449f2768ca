"""What the long offline jobs (corpus, training, evaluation, benchmarks) share: progress lines, worker
processes, and the tables and figures of their reports."""
