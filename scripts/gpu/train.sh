#!/usr/bin/env bash
# One training session on the GPU host, in a fixed wall-clock allowance:
#   1. espeak-ng, flite and festival from the carried Debian packages (scripts/gpu/espeak-env.sh), unless all are
#      on PATH;
#   2. the corpus rendered into $WORK/corpus (skipped when it is already there; an interrupted render resumes);
#   3. the acoustic model and the vocoder (its generator, or with VOCODER_ARGS="--vocoder-variant vocos" a fresh
#      STFT-predicting one, tts_triton/models/vocos.py) trained side by side, as two processes (one GPU each when
#      there are two, else sharing one; VOCODER_GPUS=N runs the vocoder data-parallel on GPUs 0..N-1, the
#      acoustic model sharing GPU 0, whose launch-bound loop leaves most of it idle), until the allowance is
#      nearly spent. Each continues its run in $WORK
#      when that holds one (--resume: optimizer moments and discriminators too, e.g. on a GPU machine kept warm
#      between two calls), else starts from INIT_CHECKPOINT (weights and step counts) or from scratch;
#   4. into $OUT: the merged checkpoint in fp16 (voice.pt.partNN, <= 15 MB each: `cat voice.pt.part* > voice.pt`),
#      the latest acoustic and vocoder PNGs, and extras.tar.gz (loss logs and curves, every plot, the vocoder's
#      sample WAV, the corpus summary, the step profiles of a --profile run).
# Output lines of the two trainers are prefixed "A|" and "V|".
#
# Usage, from anywhere:  scripts/gpu/train.sh TOTAL_SECONDS [INIT_CHECKPOINT]
#   TOTAL_SECONDS is the whole script's allowance; training gets what rendering leaves, minus RESERVE_S.
# Environment: OUT (default runs/out), WORK (runs/work), PYTHON (.venv/bin/python if present, else python3), CORPUS_LIMIT (utterances to render;
#   default the whole plan: 20,700 ~ 20 h of audio), CORPUS_ARGS (more flags of the corpus build), JOBS (nproc),
#   RESERVE_S (50), TRAIN_MINUTES (overrides the computed
#   training time), FRAMES_PER_STEP (decoder r of a fresh model, 3), ACOUSTIC_ARGS / VOCODER_ARGS (more flags),
#   PARTS ("acoustic vocoder": the trainers to run; a part left out keeps its weights from $WORK or
#   INIT_CHECKPOINT), VOCODER_GPUS (1), VOCODER_MELS (ground-truth, or gta: the vocoder trains on INIT_CHECKPOINT's teacher-forced mels, made once
#   into $WORK/corpus-gta by tts_triton.training.gta), GTA_ARGS (more flags of that, e.g. "--voices slt": only the
#   natural voice's mels teacher-forced; delete $WORK/corpus-gta to remake it with other flags).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
total=${1:?usage: scripts/gpu/train.sh TOTAL_SECONDS [INIT_CHECKPOINT]}
init=${2:-}
OUT=${OUT:-runs/out}
WORK=${WORK:-runs/work}
# setup.sh's venv when there is one (over the host's torch, with soundfile, which the trainers' WAVs need)
if [[ -z ${PYTHON:-} ]]; then [[ -x .venv/bin/python ]] && PYTHON=.venv/bin/python || PYTHON=python3; fi
CORPUS_LIMIT=${CORPUS_LIMIT:-}
JOBS=${JOBS:-$(nproc)}
RESERVE_S=${RESERVE_S:-50}
FRAMES_PER_STEP=${FRAMES_PER_STEP:-3}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$OUT" "$WORK"
# the checkout importable as installed (tts_triton.client and .export live in other folders; see checkout-path.sh)
scripts/gpu/checkout-path.sh "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null
say() { printf '==> [%4ds] %s\n' "$SECONDS" "$*"; }

if ! command -v espeak-ng >/dev/null 2>&1 || ! command -v flite >/dev/null 2>&1 ||
   ! command -v festival >/dev/null 2>&1 || ! command -v hts_engine >/dev/null 2>&1; then
  # shellcheck source=espeak-env.sh
  source scripts/gpu/espeak-env.sh .espeak-debs >/dev/null
fi
say "$(espeak-ng --version | head -n1); $({ flite --version 2>/dev/null || true; } | grep -o 'flite-[^ ]*'); $(festival --version)"
"$PYTHON" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else "(cpu)")'

corpus=$WORK/corpus
if [[ ! -f $corpus/manifest.jsonl ]]; then
  say "rendering ${CORPUS_LIMIT:-the whole plan of} utterances with $JOBS jobs"
  # shellcheck disable=SC2086  # the extra flags are meant to split
  "$PYTHON" -m tts_triton.data.corpus build --out "$corpus" --jobs "$JOBS" ${CORPUS_LIMIT:+--limit "$CORPUS_LIMIT"} \
    ${CORPUS_ARGS:-} --quiet
fi

gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')
v_ranks=${VOCODER_GPUS:-1}
((v_ranks == 1 || v_ranks <= gpus)) || { say "VOCODER_GPUS=$v_ranks but $gpus GPUs"; exit 2; }
a_gpu=${CUDA_VISIBLE_DEVICES:-0} v_gpu=${CUDA_VISIBLE_DEVICES:-0}
if ((v_ranks > 1)); then
  v_gpu=$(seq -s, 0 $((v_ranks - 1)))
elif ((gpus >= 2)) && [[ -z ${CUDA_VISIBLE_DEVICES:-} ]]; then
  v_gpu=1
fi
vocoder_launch=("$PYTHON")
((v_ranks > 1)) && vocoder_launch+=(-m torch.distributed.run --standalone --nproc-per-node "$v_ranks")
vocoder_corpus=$corpus
if [[ ${VOCODER_MELS:-ground-truth} == gta ]]; then
  vocoder_corpus=$WORK/corpus-gta
  if [[ ! -f $vocoder_corpus/dataset.json ]]; then
    say "teacher-forced mels of ${init:?VOCODER_MELS=gta needs INIT_CHECKPOINT} for the vocoder"
    # shellcheck disable=SC2086  # the extra flags are meant to split
    CUDA_VISIBLE_DEVICES=${v_gpu%%,*} "$PYTHON" -m tts_triton.training.gta --data "$corpus" --out "$vocoder_corpus" \
      --checkpoint "$init" --batch-size 128 ${GTA_ARGS:-}
  fi
fi

minutes=${TRAIN_MINUTES:-$(awk -v t="$total" -v s="$SECONDS" -v r="$RESERVE_S" 'BEGIN { printf "%.2f", (t - s - r) / 60 }')}
PARTS=${PARTS:-acoustic vocoder}
say "training $PARTS for $minutes min (GPUs: acoustic $a_gpu, vocoder $v_gpu)${init:+, from $init unless resuming}"
common=(--minutes "$minutes" --frames-per-step "$FRAMES_PER_STEP" --resume)
[[ -n $init ]] && common+=(--init "$init")
declare -A pids=()
if [[ " $PARTS " == *" acoustic "* ]]; then
  # shellcheck disable=SC2086  # the extra flags are meant to split
  CUDA_VISIBLE_DEVICES=$a_gpu "$PYTHON" -m tts_triton.training.train_acoustic "${common[@]}" --data "$corpus" \
    --out "$WORK/acoustic" ${ACOUSTIC_ARGS:-} 2>&1 | sed -u 's/^/A| /' &
  pids[acoustic]=$!
fi
if [[ " $PARTS " == *" vocoder "* ]]; then
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$v_gpu "${vocoder_launch[@]}" -m tts_triton.training.train_vocoder "${common[@]}" \
    --data "$vocoder_corpus" --out "$WORK/vocoder" ${VOCODER_ARGS:-} 2>&1 | sed -u 's/^/V| /' &
  pids[vocoder]=$!
fi
status=0
for part in "${!pids[@]}"; do
  wait "${pids[$part]}" || { status=$?; say "$part training FAILED ($status)"; }
done

a=$WORK/acoustic/checkpoint.pt v=$WORK/vocoder/checkpoint.pt
[[ -f $a ]] || a=${init:-}
[[ -f $v ]] || v=${init:-}
if [[ -n $a && -n $v ]]; then
  "$PYTHON" -m tts_triton.training.merge --acoustic "$a" --vocoder "$v" --out "$WORK/voice.pt" --half \
    --record "scripts/gpu/train.sh $*"
  rm -f "$OUT"/voice.pt.part*
  split -b 15M -d "$WORK/voice.pt" "$OUT/voice.pt.part"
fi
for part in acoustic vocoder; do
  [[ -f $WORK/$part/latest.png ]] && cp "$WORK/$part/latest.png" "$OUT/$part.png"
done
(cd "$WORK" && tar czf "$OUT/extras.tar.gz" --ignore-failed-read corpus/dataset.json \
  acoustic/losses.jsonl acoustic/losses.png acoustic/plots vocoder/losses.jsonl vocoder/losses.png vocoder/plots \
  vocoder/sample.wav acoustic/profile.txt vocoder/profile.txt 2>/dev/null) || true
ls -l "$OUT"
say "done (status $status)"
exit $status
