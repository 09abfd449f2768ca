"""Objective evaluation of a checkpoint against espeak-ng, the teacher it was trained to imitate.

    python -m tts_triton.evaluate [--checkpoint PATH] [--sentences 50] [--out docs/evaluation.md]

The first ``--sentences`` TEST-split sentences of the corpus are synthesized with the in-process
reference synthesizer, each with the voice bank's preset for its (voice, emotion); sentence ``j``
takes the corpus's emotion for it (``EMOTIONS[j % 5]``) and voice ``VOICES[(j // 5) % 10]``, so 50
sentences cover every voice x emotion pair once. Each output is compared with espeak-ng's rendering
(:func:`tts_triton.data.prosody.render`) of the same sentence and emotion in all ten voices:

- **MCD-DTW** (dB) against the target voice's rendering, see :func:`~tts_triton.evaluate.metrics.features` and
  :func:`~tts_triton.evaluate.metrics.mcd`;
- **voice identity**: the output is nearer (MCD) to the target voice than to every other voice;
- **stop failures**: utterances whose decoding hit the max-steps guard;
- **emotion order**: each voice's two shortest sentences are synthesized in every emotion; their
  mean F0 must rise along :data:`~tts_triton.data.prosody.PITCH_ORDER`.

As a diagnostic, espeak-ng's own log-mel of those emotion sentences goes through the checkpoint's
vocoder alone (copy-synthesis): the MCD and F0 order it keeps bound what the full system can reach.

With ``--asr`` (or ``--asr-only``, which skips everything above and writes its report to ``--out`` and its JSON
beside it) the report adds an **ASR round trip** (:mod:`~tts_triton.evaluate.asr`): PocketSphinx transcribes
``--asr-sentences`` held-out sentences (:mod:`~tts_triton.evaluate.heldout`) spoken by the model and by the
voice's own teacher (espeak-ng, or flite for ``slt``: any voice of ``prosody.CORPUS_VOICES`` the bank has
presets for) in each of ``--asr-voices``, and by flite's default voice when it is installed; per voice the mean
word error rate of each. ``--asr-mcd`` adds the median MCD from the model's clips to the teacher's; with
``--asr-only``, ``--asr-emotions N`` adds the emotion order of those voices on N held-out sentences
(:mod:`~tts_triton.evaluate.emotion_order`).

The report goes to ``--out``, plots to ``eval/`` and three WAV samples to ``samples/`` beside it.
Features of espeak-ng renderings are cached in ``--cache`` (keyed by text, voice, prosody, the
espeak-ng version and the feature settings): the first run renders about 600 clips.

Modules: :mod:`~tts_triton.evaluate.metrics` (features, distances, test sentences: what the scripts import),
:mod:`~tts_triton.evaluate.synthesis` (in-process synthesis), :mod:`~tts_triton.evaluate.run` (the run),
:mod:`~tts_triton.evaluate.report` (report, figures, samples), :mod:`~tts_triton.evaluate.asr` and
:mod:`~tts_triton.evaluate.heldout` (the ASR round trip), :mod:`~tts_triton.evaluate.emotion_order` and
:mod:`~tts_triton.evaluate.cli`.
"""
