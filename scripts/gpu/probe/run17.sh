# GPU run 17 (issue 12, session 9): run 14's measurement again (the product path, `tts-triton bench --target
# torch-cuda --mps`, the same defaults, twice) with the bench's new rule: each level's opening burst (every
# worker's first request, all C sent at once) is reported apart, not among the measured requests.
exec bash "$(dirname "$0")/run14.sh"
