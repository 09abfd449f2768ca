# GPU run 18 (issue 12, session 9): run 15's in-process batch-1 calls again, with overhead.py now also timing each
# StageRunner.run after 5 ms idle (does an idle host and GPU explain why a call runs slower inside Triton?).
exec bash "$(dirname "$0")/run15.sh"
