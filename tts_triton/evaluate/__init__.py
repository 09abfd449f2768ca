"""Objective evaluation of a checkpoint against its teachers (espeak-ng; flite, and festival for slt's neutral).

    python -m tts_triton.evaluate [--checkpoint PATH] [--voices all] [--sentences 55] [--out docs/evaluation.md]

The voices are ``--voices``, by default the ones the checkpoint learned (:attr:`Checkpoint.voices
<tts_triton.models.checkpoint.Checkpoint.voices>`: the ten espeak-ng voices of ``prosody.VOICES``, and slt once a
checkpoint has learned it). The first ``--sentences`` TEST-split sentences of the corpus (default: five per voice)
are synthesized with the in-process reference synthesizer, each with the voice bank's preset for its (voice,
emotion); sentence ``j`` takes the corpus's emotion for it (``EMOTIONS[j % 5]``) and voice ``voices[j // 5]``, so
five sentences per voice cover every voice x emotion pair once. Each output is compared with the teachers'
renderings (:func:`tts_triton.data.prosody.render`) of the same sentence and emotion in every voice the checkpoint
learned, each distance taken in the narrower band of the two clips (flite speaks at 16 kHz):

- **MCD-DTW** (dB) against the target voice's rendering, see :func:`~tts_triton.evaluate.measures.features` and
  :func:`~tts_triton.evaluate.measures.mcd`;
- **voice identity**: the output is nearer (MCD) to the target voice than to every other voice;
- **stop failures**: utterances whose decoding hit the max-steps guard;
- **emotion order**: each voice's two shortest sentences are synthesized in every emotion; their
  mean F0 must rise along :data:`~tts_triton.data.prosody.PITCH_ORDER`.

As a diagnostic, the teacher's own log-mel of those emotion sentences goes through the checkpoint's
vocoder alone (copy-synthesis): the MCD and F0 order it keeps bound what the full system can reach.
The report's targets table (:mod:`~tts_triton.evaluate.quality_targets`) judges the results, the bank's default voice's
own rows included; ``python -m tts_triton.evaluate.quality_targets`` sets two evaluations' JSON side by side.

With ``--asr`` (or ``--asr-only``, which skips everything above and writes its report to ``--out`` and its JSON
beside it) the report adds an **ASR round trip** (:mod:`~tts_triton.evaluate.asr`): PocketSphinx transcribes
``--asr-sentences`` held-out sentences (:mod:`~tts_triton.evaluate.heldout`) spoken by the model and by the
voice's own teacher (espeak-ng, or flite for ``slt``: any voice of ``prosody.CORPUS_VOICES`` the bank has
presets for) in each of ``--asr-voices`` (default: ``--voices``), and by flite's default voice when it is
installed; per voice the mean word error rate of each. ``--asr-mcd`` adds the median MCD from the model's clips
to the teacher's; with ``--asr-only``, ``--asr-emotions N`` adds the emotion order of those voices on N held-out
sentences (:mod:`~tts_triton.evaluate.emotion_order`).

The report goes to ``--out``, plots to ``eval/`` and three WAV samples to ``samples/`` beside it.
Features of the teachers' renderings are cached in ``--cache`` (keyed by text, voice, prosody, the
teacher's version, the feature settings and the band): the first run renders about 12 clips per sentence.

Modules: :mod:`~tts_triton.evaluate.measures` (features, distances, test sentences: what the scripts import),
:mod:`~tts_triton.evaluate.synthesis` (in-process synthesis), :mod:`~tts_triton.evaluate.run` (the run),
:mod:`~tts_triton.evaluate.report` (report, figures, samples), :mod:`~tts_triton.evaluate.asr` and
:mod:`~tts_triton.evaluate.heldout` (the ASR round trip), :mod:`~tts_triton.evaluate.emotion_order`,
:mod:`~tts_triton.evaluate.quality_targets` (the targets and the before/after table),
:mod:`~tts_triton.evaluate.samples` (before/after WAVs of the default voice) and :mod:`~tts_triton.evaluate.cli`
(the command line).
"""
