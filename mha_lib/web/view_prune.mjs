// view_prune.mjs -- the "prune" view: MiniLM with a 6 x 12 grid of head toggles (the model's head_mask
// input): embedding fidelity and paraphrase ranking against the unpruned model.

import { rowFilesFor } from "./compute.mjs";
import { paraphraseScores, runBert } from "./compute_bert.mjs";
import { checkHeadMask, describeValue, isList } from "./checks.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { formatMB, truncationText } from "./text.mjs";
import { sentences, t } from "./i18n.mjs";
import { hasWords } from "./wordpiece.mjs";
import { HeadToggles } from "./head_toggles.mjs";
import { LayerMaps } from "./layer_maps.mjs";
import { MINILM, TOGGLE_DELAY_MS, View } from "./view.mjs";

/** "prune": MiniLM with head toggles; fidelity and paraphrase ranking against all heads on. */
export class PruneView extends View {
  constructor(element, config, backend) {
    super(element, config, [element.dataset.model || MINILM], backend);
    this.firstActionText = t("Turn heads off and on: the embeddings and the scores are recomputed.");
    this.tokenIds = isList(config.token_ids) ? config.token_ids.filter(Number.isInteger) : null;
    this.mask = config.mask.map((row) => row.map((v) => (v ? 1 : 0)));
    this.text = config.text;
    this.root.setAttribute("aria-label", t("Turn MiniLM's heads off and watch the embeddings and the maps change"));
    this.scores = el("p", { class: "mha-live-scores mha-live-pinned", "aria-live": "polite" }); // in sight on a phone
    this.maps = new LayerMaps(this, config.attentions.length, config.layer || 0);
    this.sentenceNote = el("p", { class: "mha-live-note" });
    this.toggles = new HeadToggles(this.mask, (mask) => {
      this.mask = mask;
      this.toggled();
    });
    this.attach([this.toggles.node, this.scores, this.sentenceNote, ...this.englishModelNote(), this.maps.control.node],
      [this.maps.node]);
    // the download notice (sizes) before the toggles: read before the first click
    this.root.insertBefore(this.progress, this.about.nextSibling);
    this.root.insertBefore(this.status, this.progress);
    this.describeSentence();
    this.result = { tokens: config.tokens, attentions: config.attentions, mask: this.mask, fidelity: config.fidelity,
      mrr: config.mrr, source: "config" };
    this.showScores(config.fidelity, config.mrr);
    this.maps.control.update();
    this.maps.show(config.tokens, config.attentions, this.mask, config.text);
    this.later = debounce(() => this.run({ mask: this.mask }).catch(() => {}), TOGGLE_DELAY_MS);
  }

  describeSentence(text = this.text) {
    setText(this.sentenceNote, t("The maps below are those of the sentence “{text}”: a head turned off still computes " +
      "its weights (drawn grey), but its output no longer reaches the next layer.", { text }));
  }

  toggled() {
    this.maps.show(this.maps.tokens, this.maps.attentions, this.mask); // grey at once; new weights follow
    this.ensureModels().catch(() => {});
    this.later();
  }

  showScores(fidelity, mrr, mask = this.mask) {
    const on = mask.flat().filter(Boolean).length;
    const total = mask.flat().length;
    const all = (this.reference ? this.reference.mrr : this.config.mrr_all).toFixed(3);
    this.scores.replaceChildren(
      t("{on} of {total} heads on. Embedding fidelity (mean cosine to the unpruned embeddings): ", { on, total }),
      el("strong", {}, fidelity.toFixed(3)),
      t(". Paraphrase ranking (mean reciprocal rank of each paraphrase, 1 = always first; all heads on: {all}): ", { all }),
      el("strong", {}, mrr.toFixed(3)), t("."));
  }

  redraw() {
    this.maps.draw();
    this.zoom.draw();
  }

  /** Its texts are known: the word vectors of their words, exactly (row files from the config's token ids). */
  wordVectorsNote(info) {
    if (!this.tokenIds?.length) return super.wordVectorsNote(info);
    const files = rowFilesFor(info.token_rows, this.tokenIds).length;
    return t(", and the word vectors of the words of its sentence and {count} texts ({size})",
      { count: this.config.texts.length, size: formatMB(files * info.token_rows.file_bytes) });
  }

  /** The embeddings of the scores' texts with all heads on, once: the reference of fidelity. */
  async referenceEmbeddings(clock) {
    if (!this.reference) {
      const full = this.mask.map((row) => row.map(() => 1));
      const r = await runBert(this.models[0], this.scoreTexts(), full, { onFetch: this.onFetch, maps: false, clock });
      const scores = paraphraseScores(r.embeddings, r.embeddings, r.d, this.config.num_anchors);
      this.reference = { embeddings: r.embeddings, d: r.d, mrr: scores.mrr };
    }
    return this.reference;
  }

  /** The texts of the scores (anchors, then candidates), stripped as mha_lib does. */
  scoreTexts() {
    return this.config.texts.map((x) => x.trim());
  }

  /** run()'s input as {mask?: [layer][head] of 0/1 (a copy), text?}; throws, naming the value, on anything else. */
  checkInput(input) {
    const spec = typeof input === "string" ? { text: input } : input;
    if (!spec || typeof spec !== "object" || Array.isArray(spec)) {
      throw new Error(`run() takes {mask, text} or a sentence, got ${describeValue(input)}`);
    }
    const unknown = Object.keys(spec).filter((k) => k !== "mask" && k !== "text");
    if (unknown.length || (spec.mask === undefined && spec.text === undefined)) {
      throw new Error(`run() takes {mask, text} (at least one), got the keys [${Object.keys(spec).join(", ")}]`);
    }
    if (spec.text !== undefined && typeof spec.text !== "string") {
      throw new Error(`run({text}): the text must be a string, got ${describeValue(spec.text)}`);
    }
    const mask = spec.mask === undefined ? null : checkHeadMask(spec.mask, this.mask.length, this.mask[0].length);
    return { mask, text: spec.text };
  }

  /**
   * Recompute with a head mask. input: {mask?: [layer][head] of 0/1 or booleans, text?: sentence}
   * (at least one of them) or a string (the sentence). Resolves to lastResult = {tokens, attentions,
   * mask, fidelity, mrr}, of this call's mask and sentence. Rejects, state kept, on anything else:
   * the message names the offending value.
   */
  async run(input) {
    let spec;
    try {
      spec = this.checkInput(input);
    } catch (err) {
      throw this.refuse(err);
    }
    if (spec.text !== undefined && !hasWords(spec.text)) {
      this.note(t("The text is empty (nothing the tokenizer keeps): the maps show the last one."));
      throw new Error("empty text");
    }
    const newMask = spec.mask;
    // the input is valid: it becomes the state (the toggles show it), and this call keeps its own copy
    if (spec.text !== undefined) this.text = spec.text;
    if (newMask) {
      this.mask = newMask;
      this.toggles.set(newMask);
    }
    const mask = this.mask.map((row) => row.slice());
    const sentence = this.text;
    const out = await this.compute(async (clock) => {
      const model = this.models[0];
      const NL = model.info.num_layers;
      // the sentence's maps first, layer by layer from the first layer whose heads changed (one frame per layer) ...
      const draws = [];
      const r = await runBert(model, [sentence], mask, { onFetch: this.onFetch, clock,
        onTokens: (encodings) => this.maps.begin(encodings[0].tokens, NL, mask, sentence),
        onLayer: (l, maps) => draws.push(this.maps.setLayer(l, maps)) });
      await Promise.all(draws);
      this.maps.commit();
      this.describeSentence(sentence);
      // ... then every text's embedding (the same: from the first layer whose heads changed), and the scores
      const ref = await this.referenceEmbeddings(clock);
      const e = await runBert(model, this.scoreTexts(), mask, { onFetch: this.onFetch, maps: false, clock });
      const scores = clock.time("read", () => paraphraseScores(e.embeddings, ref.embeddings, e.d, this.config.num_anchors));
      clock.time("draw", () => this.showScores(scores.fidelity, scores.mrr, mask));
      this.timings.draw_ms = clock.parts.draw_ms;
      this.timings.infer_ms = performance.now() - clock.started - clock.parts.draw_ms;
      const enc = r.encodings[0];
      return { tokens: enc.tokens, attentions: r.attentions, mask, ...scores, texts: e.embeddings.length / e.d,
        truncated: enc.truncated, fullLength: enc.fullLength, source: this.backend.kind };
    });
    this.result = out;
    const done = t("Recomputed {count} embeddings and the maps {where} in {ms} ms.",
      { count: out.texts, where: this.where, ms: Math.round(this.timings.run_ms) });
    // a sentence past the model's limit: say so, as the sentence view does (the scores' texts are short)
    this.note(out.truncated ? sentences(done, truncationText(sentence, out.fullLength, out.tokens.length)) : done);
    return out;
  }
}

