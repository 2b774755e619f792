// view_induction.mjs -- the "induction" view: chapter 5's two-layer model on a token sequence the reader
// edits, at any of its training checkpoints, with heads switched off at will: every head's map with its
// previous-token and induction scores on the sequence, and the next token each position predicts.

import { runInduction } from "./compute_toys.mjs";
import { checkArray, checkHeadMask, describeValue } from "./checks.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { HeadGrid } from "./draw.mjs";
import { HeadToggles } from "./head_toggles.mjs";
import { largestWeight } from "./layout.mjs";
import { TOGGLE_DELAY_MS, TYPING_DELAY_MS, View } from "./view.mjs";
import { sentences, t } from "./i18n.mjs";

/** A sequence as the box shows it: token ids separated by spaces. */
const asText = (ids) => ids.join(" ");

/**
 * A random sequence of the task's kind (mha_lib.tasks.InductionTask): L tokens in 0..V-1 in which a segment of
 * r tokens (3 to 8) occurs twice, at random places. `random` gives numbers in [0, 1).
 */
export function repeatedSequence(V, L, random = Math.random) {
  const r = 3 + Math.floor(random() * Math.min(6, Math.floor(L / 2) - 2));
  const s1 = Math.floor(random() * (L - 2 * r + 1));
  const s2 = s1 + r + Math.floor(random() * (L - 2 * r - s1 + 1));
  const ids = Array.from({ length: L }, () => Math.floor(random() * V));
  for (let k = 0; k < r; k++) ids[s2 + k] = ids[s1 + k];
  return ids;
}

/**
 * The reader's sequence from the box: integers in 0..V-1 separated by spaces or commas, 2 to L of them.
 * @returns {number[]}
 * @throws {Error} naming the offending token: `token 3 is "x", not a number in 0..63`
 */
export function parseSequence(text, V, L) {
  const parts = String(text).split(/[\s,]+/).filter((p) => p !== "");
  if (parts.length < 2 || parts.length > L) {
    throw new Error(t("the sequence has {count} tokens; give 2 to {most}", { count: parts.length, most: L }));
  }
  return parts.map((p, i) => {
    if (!/^\d+$/.test(p) || Number(p) >= V) {
      throw new Error(t("token {i} is {token}, not a number in 0..{last}", { i, token: describeValue(p), last: V - 1 }));
    }
    return Number(p);
  });
}

/**
 * The sequence box shared by the induction and patterns views: a note on what to type, the box (token ids of
 * view.task, checked by parseSequence as the reader types; a refusal keeps the state) and a "New sequence with a
 * repeat" button. Sets view.box; a good sequence becomes view.ids and calls view.changed().
 * @returns {HTMLElement[]}  the nodes, in order
 */
export function sequenceControls(view) {
  const { vocab_size: V, seq_len: L } = view.task;
  // a text box of two lines: all 32 numbers in sight on a phone too
  view.box = el("textarea", { id: `mha-live-seq-${Math.random().toString(36).slice(2)}`, rows: "2",
    inputmode: "numeric", spellcheck: "false", autocomplete: "off", class: "mha-live-sequence-box" });
  view.box.value = asText(view.ids);
  const typed = debounce(() => {
    let ids;
    try {
      ids = parseSequence(view.box.value, V, L);
    } catch (err) {
      view.refuse(err);
      return;
    }
    view.ids = ids;
    view.changed(false);
  }, TYPING_DELAY_MS);
  view.box.addEventListener("input", () => {
    view.root.classList.add("mha-live-stale");
    view.ensureModels().catch(() => {});
    typed();
  });
  const fresh = el("button", { type: "button", class: "mha-live-button" }, t("New sequence with a repeat"));
  fresh.addEventListener("click", () => {
    view.ids = repeatedSequence(V, L);
    view.box.value = asText(view.ids);
    view.changed();
  });
  return [el("p", { class: "mha-live-note" }, t("Token ids 0–{last}, separated by spaces, 2 to {most} of them. A " +
      "position can be predicted by copying when its token and the next one occurred together earlier: " +
      "those positions are scored.", { last: V - 1, most: L })),
    el("label", { for: view.box.id, class: "mha-live-label" }, t("Your sequence")), view.box,
    el("div", { class: "mha-live-controls" }, fresh)];
}

/**
 * The row of predictions under the maps: for each position its number and the next token predicted; where
 * copying gives the answer (r.copyable), ✓ or ✗ and, when wrong, the copy's token. Shared with the patterns view.
 */
export function fillPredictionStrip(strip, r) {
  const copyable = new Set(r.copyable);
  strip.replaceChildren(...r.predictions.map((p, i) => {
    const scored = copyable.has(i);
    const ok = scored && p === r.ids[i + 1];
    const cell = el("span", { role: "listitem", class: scored ? (ok ? "mha-live-right" : "mha-live-wrong") : "" });
    cell.append(el("small", {}, String(i)), el("span", {}, scored ? `${p}${ok ? "✓" : "✗"}` : "–"));
    if (scored && !ok) cell.append(el("small", { class: "mha-live-answer" }, String(r.ids[i + 1])));
    const words = { i, p, copy: r.ids[i + 1] };
    cell.setAttribute("aria-label", !scored ? t("position {i}: predicts {p}, not scored", words)
      : ok ? t("position {i}: predicts {p}, the copy gives {copy}, right", words)
        : t("position {i}: predicts {p}, the copy gives {copy}, wrong", words));
    return cell;
  }));
}

/** "induction": chapter 5's checkpoints on the reader's sequence, heads switched off at will. */
export class InductionView extends View {
  constructor(element, config, backend) {
    super(element, config, config.models.slice(), backend);
    this.task = config.task;
    this.steps = config.steps.slice();
    this.checkpoint = config.checkpoint;
    this.ids = config.ids.slice();
    this.mask = config.mask.map((row) => row.map((v) => (v ? 1 : 0)));
    /** @type {HTMLTextAreaElement|null} the sequence box (sequenceControls makes it) */
    this.box = null;
    this.firstActionText = t("Edit the sequence, move the slider or turn a head off: the model reruns.");
    this.root.setAttribute("aria-label", t("Chapter 5's model at its training checkpoints, on a sequence you edit"));
    this.attach([this.buildControls()], [this.buildMaps()]);
    this.requests = 0;
    this.show({ ...this.readingsOf(config), ids: this.ids, checkpoint: this.checkpoint, mask: this.mask,
      source: "config" });
    this.later = debounce(() => this.run({ ids: this.ids, checkpoint: this.checkpoint, mask: this.mask })
      .catch(() => {}), TOGGLE_DELAY_MS);
  }

  /** The readings keys of a config (it holds them beside the view's own keys). */
  readingsOf(config) {
    const keys = ["attentions", "predictions", "confidence", "previous", "induction", "copyable", "accuracy"];
    return Object.fromEntries(keys.filter((k) => config[k] !== undefined).map((k) => [k, config[k]]));
  }

  buildControls() {
    const uid = Math.random().toString(36).slice(2);
    this.slider = el("input", { type: "range", id: `mha-live-step-${uid}`, min: "0", max: String(this.steps.length - 1),
      step: "1", value: String(this.checkpoint) });
    this.stepText = el("output", { for: this.slider.id });
    this.slider.addEventListener("input", () => {
      this.checkpoint = Number(this.slider.value);
      this.describeStep();
      this.changed();
    });
    this.toggles = new HeadToggles(this.mask, (mask) => {
      this.mask = mask;
      this.changed();
    });
    this.describeStep();
    return el("div", {}, ...sequenceControls(this),
      el("div", { class: "mha-live-controls" }, el("label", { for: this.slider.id }, t("Training")), this.slider,
        this.stepText),
      this.toggles.node);
  }

  describeStep() {
    const step = this.steps[this.checkpoint];
    const text = t("after {step} of {last} steps", { step: step.toLocaleString("en-US"),
      last: this.steps[this.steps.length - 1].toLocaleString("en-US") });
    this.slider.setAttribute("aria-valuetext", text);
    setText(this.stepText, text);
  }

  buildMaps() {
    this.scores = el("p", { class: "mha-live-scores", "aria-live": "polite" });
    this.layers = el("div");
    this.grids = [];
    const captionId = `mha-live-strip-${Math.random().toString(36).slice(2)}`;
    this.strip = el("div", { class: "mha-live-strip mha-live-strip-wrap", role: "list", "aria-labelledby": captionId });
    const caption = el("p", { class: "mha-live-strip-caption", id: captionId },
      t("Under each position (the small number): the next token the model predicts there. Where copying gives " +
      "the answer, ✓ marks it right, ✗ wrong (the copy's token under it); – elsewhere."));
    const maps = el("p", { class: "mha-live-note" }, t("Each head's map: a row per query position, a column per key " +
      "position (click a map to enlarge it with the tokens). Its label gives two scores on your sequence: prev, the " +
      "head's mean weight on the previous token; ind, its mean weight on the token just after an earlier occurrence " +
      "of the query's token (where an induction head looks)."));
    return el("div", {}, this.scores, caption, this.strip, maps, this.layers);
  }

  /** A change by the reader: the maps shown become stale, and the model reruns after a moment. */
  changed(soon = true) {
    this.requests += 1;
    this.root.classList.add("mha-live-stale");
    this.ensureModels().catch(() => {});
    if (soon) this.later();
    else this.run({ ids: this.ids, checkpoint: this.checkpoint, mask: this.mask }).catch(() => {});
  }

  /** Draw a result (readings of a checkpoint on ids with mask); it becomes lastResult. */
  show(result) {
    this.result = { ...result, tokens: result.ids.map(String), step: this.steps[result.checkpoint],
      model: this.modelIds[result.checkpoint] };
    this.root.classList.remove("mha-live-stale");
    const r = this.result;
    const on = r.mask.flat().filter(Boolean).length;
    const right = r.copyable.filter((i) => r.predictions[i] === r.ids[i + 1]).length;
    const words = { step: r.step.toLocaleString("en-US"), on, total: r.mask.flat().length, right, count: r.copyable.length };
    setText(this.scores, r.copyable.length
      ? t("After {step} training steps, {on} of {total} heads on: {right} of {count} positions that copying can " +
        "predict are right.", words)
      : t("After {step} training steps, {on} of {total} heads on: no position of this sequence can be predicted by " +
        "copying (no pair of tokens occurs twice).", words));
    fillPredictionStrip(this.strip, r);
    this.draw();
  }

  draw() {
    const r = this.result;
    const vmax = largestWeight(r.attentions.flat());
    this.vmax = vmax;
    this.legend.show(vmax);
    const width = this.layers.clientWidth || 600;
    r.attentions.forEach((layer, l) => {
      if (!this.grids[l]) {
        const grid = new HeadGrid({ readout: this.readout, minMap: 130 });
        const title = el("p", { class: "mha-live-layer-title" }, t("layer {layer}", { layer: l }));
        grid.onEnlarge = (h) => {
          this.lastFocus = grid.buttons[h];
          this.enlarge(grid.heads[h], grid.tokens, grid.vmax, grid, h); // the tokens of the maps drawn now
        };
        this.layers.append(title, grid.node);
        this.grids[l] = grid;
      }
      const heads = layer.map((map, h) => {
        const ind = r.induction ? ` · ind ${r.induction[l][h].toFixed(2)}` : "";
        return { key: `L${l}.H${h}`, label: `L${l}.H${h} · prev ${r.previous[l][h].toFixed(2)}${ind}`, map,
          off: !r.mask[l][h] };
      });
      this.grids[l].show(heads, this.result.tokens, vmax, width);
    });
    if (!this.zoom.node.hidden && this.zoom.head) { // the enlarged head, with its new weights
      for (const grid of this.grids) {
        const h = grid.heads.findIndex((x) => x.key === this.zoom.head.key);
        if (h >= 0) {
          grid.placeZoom(this.zoom.node, h);
          this.zoom.open(grid.heads[h], this.result.tokens, vmax);
        }
      }
    }
  }

  redraw() {
    this.draw();
    this.zoom.draw();
  }

  /** The export (see View.exportFigure): every head of both layers, the readings in the JSON. */
  exportFigure() {
    const r = this.result;
    const heads = this.grids.flatMap((grid) => grid.heads.map((h) => ({ label: h.label, map: h.map, off: h.off,
      tokens: r.tokens })));
    const off = heads.filter((h) => h.off).map((h) => h.label.split(" ")[0]);
    const scale = t("Rows are queries, columns keys; colour 0 to {vmax}.", { vmax: this.vmax.toFixed(2) });
    const title = [t("{model}: chapter 5's model after {step} training steps, every head", { model: r.model, step: r.step }),
      t("Sequence: {ids}", { ids: asText(r.ids) }),
      off.length ? sentences(t("Turned off: {heads}.", { heads: off.join(" ") }), scale) : scale];
    return { name: [r.model], title, heads, vmax: this.vmax,
      data: { view: "induction", model: r.model, step: r.step, ids: r.ids, mask: r.mask, source: r.source,
        ...this.readingsOf(r) } };
  }

  /** run()'s input: {ids?, checkpoint?, mask?} (at least one), each checked; the others stay as they are. */
  checkInput(input) {
    if (!input || typeof input !== "object" || Array.isArray(input)) {
      throw new Error(`run() takes {ids, checkpoint, mask}, got ${describeValue(input)}`);
    }
    const unknown = Object.keys(input).filter((k) => !["ids", "checkpoint", "mask"].includes(k));
    if (unknown.length || !Object.keys(input).length) {
      throw new Error(`run() takes {ids, checkpoint, mask} (at least one), got the keys [${Object.keys(input).join(", ")}]`);
    }
    const { vocab_size: V, seq_len: L } = this.task;
    let ids = this.ids;
    if (input.ids !== undefined) {
      const fail = (what) => {
        throw new Error(`run({ids}): ${what}`);
      };
      const token = (id, i) => (Number.isInteger(id) && id >= 0 && id < V ? id
        : fail(`ids[${i}] = ${describeValue(id)} is not a token id in 0..${V - 1}`));
      ids = checkArray(input.ids, { name: "ids", what: "tokens", item: token, fail });
      if (ids.length < 2 || ids.length > L) fail(`ids has ${ids.length} tokens; the model reads 2 to ${L}`);
    }
    let checkpoint = this.checkpoint;
    if (input.checkpoint !== undefined) {
      checkpoint = input.checkpoint;
      if (!Number.isInteger(checkpoint) || checkpoint < 0 || checkpoint >= this.steps.length) {
        throw new Error(`run({checkpoint}): ${describeValue(checkpoint)} is not a checkpoint index in ` +
          `0..${this.steps.length - 1}`);
      }
    }
    const mask = input.mask === undefined ? this.mask : checkHeadMask(input.mask, this.mask.length, this.mask[0].length);
    return { ids, checkpoint, mask };
  }

  /**
   * Run checkpoint `checkpoint` (an index into the steps) on `ids` with `mask`; what is not given stays. Resolves
   * with the result of THIS input (drawn if no later change came meanwhile). Rejects, state kept, on bad input.
   */
  async run(input) {
    let spec;
    try {
      spec = this.checkInput(input);
    } catch (err) {
      throw this.refuse(err);
    }
    // the input becomes the state (the box, the slider and the toggles show it)
    Object.assign(this, { ids: spec.ids.slice(), checkpoint: spec.checkpoint, mask: spec.mask.map((r) => r.slice()) });
    if (document.activeElement !== this.box) this.box.value = asText(this.ids);
    this.slider.value = String(this.checkpoint);
    this.describeStep();
    this.toggles.set(this.mask);
    this.requests += 1;
    const request = this.requests;
    let result;
    try {
      result = await this.compute(async (clock) => {
        const t0 = performance.now();
        const readings = await runInduction(this.models[spec.checkpoint], spec.ids, spec.mask, clock);
        this.timings.infer_ms = performance.now() - t0;
        const out = { ...readings, ids: spec.ids, checkpoint: spec.checkpoint, mask: spec.mask, source: this.backend.kind };
        if (request === this.requests) clock.time("draw", () => this.show(out));
        return { ...out, tokens: spec.ids.map(String), step: this.steps[spec.checkpoint] };
      });
    } catch (err) {
      if (request === this.requests) this.root.classList.remove("mha-live-stale");
      throw err;
    }
    if (request === this.requests) {
      this.note(t("Recomputed {where} in {ms} ms.", { where: this.where, ms: Math.round(this.timings.run_ms) }));
    }
    return result;
  }
}
