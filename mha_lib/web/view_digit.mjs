// view_digit.mjs -- the "digit" view: chapter 7's Vision Transformers on an 8x8 digit the reader draws
// (mouse, pen, touch or keyboard) or loads from the test set; the chosen model's ten probabilities, each
// head's [CLS] attention over the pixels (the strokes dotted), the attention rollout, and what the other
// head counts predict.

import { runDigit } from "./compute_toys.mjs";
import { checkDigitInput } from "./checks.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { HeadGrid, Legend } from "./draw.mjs";
import { largestWeight } from "./layout.mjs";
import { TOGGLE_DELAY_MS, View } from "./view.mjs";
import { headsText } from "./text.mjs";
import { sentences, t } from "./i18n.mjs";

const INK = 0.5; // a pixel at or above this grey level is a stroke (as chapter 7 counts ink)
const NEIGHBOUR = 0.4; // the brush's grey on the four pixels around the one drawn (the digits' strokes are soft)

/** What a cell of a pixel map is, for the readout, the enlarged map and screen readers (see draw.mjs). */
const PIXEL_WORDS = {
  cell: (head, _labels, q, k) => (head.rollout
    ? t("rollout: pixel (row {q}, column {k}) makes up {weight} of [CLS] at the top", { q, k, weight: head.map[q][k].toFixed(3) })
    : t("{label}: [CLS] → pixel (row {q}, column {k}): weight {weight}",
      { label: head.label, q, k, weight: head.map[q][k].toFixed(3) })),
  map: (head, n) => (head.rollout ? t("the attention rollout of [CLS] over the {n} x {n} pixels", { n })
    : t("[CLS]'s attention weights on the {n} x {n} pixels", { n })),
  get axes() {
    return t("rows and columns are the image's pixel rows and columns");
  },
};

/** The 8 x 8 drawing pad: a canvas drawn on with a pointer, and a cursor moved by the arrow keys. */
class DrawingPad {
  constructor(side, pixels, onChange) {
    this.side = side;
    this.pixels = pixels.slice();
    this.onChange = onChange;
    this.erase = false;
    this.cursor = { q: 0, k: 0 };
    this.canvas = el("canvas", { class: "mha-live-pad", tabindex: "0", role: "img" });
    this.node = el("div", { class: "mha-live-pad-box" }, this.canvas);
    let down = false;
    const at = (event) => {
      const box = this.canvas.getBoundingClientRect();
      const q = Math.floor(((event.clientY - box.top) / box.height) * side);
      const k = Math.floor(((event.clientX - box.left) / box.width) * side);
      return q >= 0 && k >= 0 && q < side && k < side ? { q, k } : null;
    };
    this.canvas.addEventListener("pointerdown", (event) => {
      down = true;
      this.canvas.setPointerCapture(event.pointerId);
      const cell = at(event);
      if (cell) this.paint(cell.q, cell.k);
      event.preventDefault();
    });
    this.canvas.addEventListener("pointermove", (event) => {
      if (!down) return;
      const cell = at(event);
      if (cell) this.paint(cell.q, cell.k);
    });
    const up = () => {
      down = false;
    };
    this.canvas.addEventListener("pointerup", up);
    this.canvas.addEventListener("pointercancel", up);
    this.canvas.addEventListener("keydown", (event) => this.key(event));
    this.canvas.addEventListener("focus", () => this.draw());
    this.canvas.addEventListener("blur", () => this.draw());
  }

  /** Ink (or erase) pixel (q, k): ink 1 there and a soft edge around it; erasing clears the one pixel. */
  paint(q, k) {
    const s = this.side;
    const before = this.pixels.join();
    if (this.erase) {
      this.pixels[q * s + k] = 0;
    } else {
      this.pixels[q * s + k] = 1;
      for (const [dq, dk] of [[-1, 0], [1, 0], [0, -1], [0, 1]]) {
        const [y, x] = [q + dq, k + dk];
        if (y >= 0 && x >= 0 && y < s && x < s) this.pixels[y * s + x] = Math.max(this.pixels[y * s + x], NEIGHBOUR);
      }
    }
    this.cursor = { q, k };
    if (this.pixels.join() !== before) {
      this.draw();
      this.onChange(this.pixels.slice());
    }
  }

  /** Arrow keys move the cursor; Space or Enter turns its pixel to ink, or back to paper. */
  key(event) {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    const { q, k } = this.cursor;
    if (event.key in moves) {
      event.preventDefault();
      const [dq, dk] = moves[event.key];
      this.cursor = { q: Math.min(this.side - 1, Math.max(0, q + dq)), k: Math.min(this.side - 1, Math.max(0, k + dk)) };
      this.draw();
    } else if (event.key === " " || event.key === "Enter") {
      event.preventDefault();
      const i = q * this.side + k;
      this.pixels[i] = this.pixels[i] >= INK ? 0 : 1;
      this.draw();
      this.onChange(this.pixels.slice());
    }
  }

  /** Show `pixels` (a copy is kept) without telling onChange: the view runs them itself. */
  set(pixels) {
    this.pixels = pixels.slice();
    this.draw();
  }

  /** Draw the pad at most 288 px a side, within `width` px (the view's column; the last width when not given). */
  draw(width = this.width) {
    this.width = width;
    const s = this.side;
    const size = Math.max(s * 16, Math.min(288, width || 288));
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(size * dpr);
    this.canvas.height = Math.round(size * dpr);
    this.canvas.style.width = `${size}px`;
    this.canvas.style.height = `${size}px`;
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const cell = size / s;
    for (let q = 0; q < s; q++) {
      for (let k = 0; k < s; k++) {
        const g = Math.round(255 * (1 - this.pixels[q * s + k])); // paper white, ink black
        ctx.fillStyle = `rgb(${g},${g},${g})`;
        ctx.fillRect(k * cell, q * cell, cell, cell);
      }
    }
    ctx.strokeStyle = "#bbb";
    ctx.lineWidth = 1;
    for (let i = 0; i <= s; i++) {
      ctx.beginPath();
      ctx.moveTo(i * cell, 0);
      ctx.lineTo(i * cell, size);
      ctx.moveTo(0, i * cell);
      ctx.lineTo(size, i * cell);
      ctx.stroke();
    }
    if (document.activeElement === this.canvas) { // the keyboard's cursor
      const { q, k } = this.cursor;
      ctx.lineWidth = 3;
      ctx.strokeStyle = "#e66100";
      ctx.strokeRect(k * cell + 1.5, q * cell + 1.5, cell - 3, cell - 3);
    }
    const inked = this.pixels.filter((v) => v >= INK).length;
    const { q, k } = this.cursor;
    const words = { s, inked, q, k };
    this.canvas.setAttribute("aria-label", this.pixels[q * s + k] >= INK
      ? t("drawing pad, {s} by {s} pixels, {inked} inked; cursor at row {q}, column {k} (ink). Arrow keys move, Space " +
        "inks or clears.", words)
      : t("drawing pad, {s} by {s} pixels, {inked} inked; cursor at row {q}, column {k} (paper). Arrow keys move, Space " +
        "inks or clears.", words));
  }
}

/** "digit": chapter 7's ViTs on a digit the reader draws. */
export class DigitView extends View {
  constructor(element, config, backend) {
    super(element, config, config.models.slice(), backend);
    this.primary = config.models.includes(element.dataset.model) ? element.dataset.model : config.models[0];
    this.side = config.side;
    this.firstActionText = t("Draw on the pad, or load a test digit: the models rerun.");
    this.root.setAttribute("aria-label", t("A digit you draw, read live by chapter 7's Vision Transformers"));
    this.labels = Array.from({ length: this.side }, (_, i) => String(i)); // a map's rows and columns
    this.label = config.label ?? null; // the test digit's label, null for a drawing
    this.pad = new DrawingPad(this.side, config.pixels, (pixels) => {
      if (this.examples) this.examples.value = ""; // a drawing is no test digit
      this.changed(pixels, null);
    });
    this.heads = {}; // model id -> its number of heads (from the notebook's numbers)
    for (const id of this.modelIds) this.heads[id] = config.results[id].cls[0].length;
    this.attach([this.buildControls()], [this.buildMaps()]);
    this.requests = 0; // only the latest input's result is drawn
    this.show({ pixels: config.pixels.slice(), label: config.label, models: config.results, source: "config" });
    const later = debounce((input) => this.run(input).catch(() => {}), TOGGLE_DELAY_MS);
    /** New pixels on the pad (drawn: label null; a test digit: its label); the maps shown become stale. */
    this.changed = (pixels, label) => {
      this.requests += 1; // a run in flight is now out of date
      this.label = label;
      this.root.classList.add("mha-live-stale");
      this.ensureModels().catch(() => {});
      later({ pixels, label });
    };
  }

  get readoutHint() {
    return t("Point at a pixel of a map to read [CLS]'s weight on it; click a map to enlarge it. On a touch screen, " +
      "tap a map to enlarge it, then tap a pixel.");
  }

  buildControls() {
    const uid = Math.random().toString(36).slice(2);
    const modeButton = (text, erase) => {
      const b = el("button", { type: "button", class: "mha-live-button", "aria-pressed": String(this.pad.erase === erase) }, text);
      b.addEventListener("click", () => {
        this.pad.erase = erase;
        for (const x of this.modeButtons) x.setAttribute("aria-pressed", String(x === b));
      });
      return b;
    };
    this.modeButtons = [modeButton(t("Draw"), false), modeButton(t("Erase"), true)];
    const clear = el("button", { type: "button", class: "mha-live-button" }, t("Clear"));
    clear.addEventListener("click", () => this.load(new Array(this.side * this.side).fill(0), null));
    this.examples = el("select", { id: `mha-live-example-${uid}` },
      el("option", { value: "" }, t("choose…")),
      ...this.config.examples.map((x, i) => el("option", { value: String(i) },
        t("test digit {nth}: a {digit}", { nth: i + 1, digit: x.label }))));
    // the test digit shown first, if it is one of the examples
    const first = this.config.examples.findIndex((x) => x.pixels.every((v, i) => v === this.config.pixels[i]));
    if (first >= 0 && this.config.label !== undefined) this.examples.value = String(first);
    this.examples.addEventListener("change", () => {
      if (this.examples.value === "") return;
      const x = this.config.examples[Number(this.examples.value)];
      this.load(x.pixels.slice(), x.label);
    });
    this.choice = el("select", { id: `mha-live-digit-model-${uid}` },
      ...this.modelIds.map((id) => el("option", { value: id },
        t("{heads} ({model})", { heads: headsText(this.heads[id]), model: id }))));
    this.choice.value = this.primary;
    this.choice.addEventListener("change", () => {
      this.primary = this.choice.value;
      this.clearReadout(); // the readout named a cell of the other model's maps
      this.draw();
    });
    const help = el("p", { class: "mha-live-note" },
      t("Draw a digit with the mouse, a pen or a finger (Erase clears pixels), or pick a test digit. With the keyboard: " +
      "focus the pad, move with the arrow keys, Space inks or clears a pixel."));
    // the answer above the pad: in sight while the reader draws, on a phone too (the bars follow below)
    this.verdict = el("p", { class: "mha-live-scores mha-live-digit-answer", "aria-live": "polite" });
    return el("div", { class: "mha-live-digit-controls" }, this.verdict, this.pad.node,
      el("div", {}, help,
        el("div", { class: "mha-live-controls" }, ...this.modeButtons, clear),
        el("div", { class: "mha-live-controls" }, el("label", { for: this.examples.id }, t("Load a test digit")), this.examples),
        el("div", { class: "mha-live-controls" }, el("label", { for: this.choice.id }, t("Model")), this.choice)));
  }

  buildMaps() {
    this.bars = el("div", { class: "mha-live-probs", role: "list", "aria-label": t("the model's probability of each digit") });
    this.others = el("p", { class: "mha-live-note" });
    this.grids = [];
    this.layers = el("div");
    this.rolloutGrid = new HeadGrid({ readout: this.readout, minMap: 110, words: PIXEL_WORDS });
    this.rolloutLegend = new Legend();
    this.rolloutGrid.onEnlarge = () => {
      this.lastFocus = this.rolloutGrid.buttons[0];
      this.enlarge(this.rolloutGrid.heads[0], this.labels, this.rolloutGrid.vmax, this.rolloutGrid, 0);
    };
    const rollout = el("div", { class: "mha-live-rollout" },
      el("p", { class: "mha-live-layer-title" }, t("Attention rollout (both layers, heads averaged, residual added)")),
      el("p", { class: "mha-live-note" }, t("How much of each pixel reaches [CLS] at the top, with a colour scale of its own:")),
      this.rolloutLegend.node, this.rolloutGrid.node);
    const key = el("p", { class: "mha-live-note" }, t("In every map the dots mark the pixels inked at least half way " +
      "(grey level 0.5 or more, as this chapter counts ink), and each head's label gives the weight [CLS] keeps on itself."));
    return el("div", {}, this.bars, this.others, key, this.layers, rollout);
  }

  /** Show new pixels on the pad and run them (Clear, a test digit). */
  load(pixels, label) {
    this.pad.set(pixels);
    this.changed(pixels, label);
  }

  /** Draw a result: {pixels, label, models: {id: readings}, source}; it becomes lastResult. */
  show(result) {
    const r = result.models[this.primary];
    this.result = { ...result, tokens: this.labels, attentions: r.cls, primary: this.primary };
    this.pad.set(result.pixels);
    this.root.classList.remove("mha-live-stale");
    this.draw();
  }

  draw() {
    const result = this.result;
    const r = result.models[this.primary];
    this.result.attentions = r.cls;
    this.result.primary = this.primary;
    const s = this.side;
    const ink = Array.from({ length: s }, (_, q) => Array.from({ length: s }, (_, k) => result.pixels[q * s + k] >= INK));
    const p = r.probabilities[r.prediction];
    const reads = t("{heads} ({model}) reads a {digit}, with probability {p}.",
      { heads: headsText(this.heads[this.primary]), model: this.primary, digit: r.prediction, p: p.toFixed(2) });
    setText(this.verdict, result.label === null || result.label === undefined ? reads
      : sentences(reads, t("The test digit is a {digit}.", { digit: result.label })));
    this.bars.replaceChildren(...r.probabilities.map((prob, digit) => el("div", { role: "listitem",
      class: digit === r.prediction ? "mha-live-prob mha-live-prob-best" : "mha-live-prob",
      "aria-label": `${digit}: ${prob.toFixed(3)}` },
    el("span", {}, String(digit)),
    el("span", { class: "mha-live-prob-bar" }, el("span", { style: `width:${(100 * prob).toFixed(1)}%` })),
    el("span", {}, prob.toFixed(2)))));
    setText(this.others, t("The other head counts read the same pixels as: {others}.", { others: this.modelIds
      .filter((id) => id !== this.primary).map((id) => t("{heads}, a {digit} (probability {p})", { heads: headsText(this.heads[id]),
        digit: result.models[id].prediction, p: result.models[id].probabilities[result.models[id].prediction].toFixed(2) }))
      .join(" · ") }));
    // each layer's heads: [CLS]'s weights on the pixels, one colour scale for all of them
    const groups = r.cls.map((layer, l) => layer.map((map, h) => ({ key: `L${l}.H${h}`, layer: l, head: h, map, ink,
      off: false, label: t("{head} · {weight} on [CLS]", { head: `L${l}.H${h}`, weight: r.cls_self[l][h].toFixed(2) }) })));
    const vmax = largestWeight(groups.flat().map((h) => h.map));
    this.vmax = vmax;
    this.legend.show(vmax);
    const width = this.layers.clientWidth || 600;
    groups.forEach((heads, l) => {
      if (!this.grids[l]) {
        const grid = new HeadGrid({ readout: this.readout, minMap: 96, words: PIXEL_WORDS });
        const title = el("p", { class: "mha-live-layer-title" });
        grid.onEnlarge = (h) => {
          this.lastFocus = grid.buttons[h];
          this.enlarge(grid.heads[h], this.labels, grid.vmax, grid, h);
        };
        this.layers.append(title, grid.node);
        this.grids[l] = { grid, title };
      }
      const { grid, title } = this.grids[l];
      setText(title, t("Layer {layer}: [CLS]'s attention over the pixels, per head", { layer: l }));
      grid.show(heads, this.labels, vmax, width);
    });
    while (this.grids.length > groups.length) { // a model with fewer layers
      const { grid, title } = this.grids.pop();
      grid.node.remove();
      title.remove();
    }
    const rollout = { key: "rollout", label: t("rollout"), map: r.rollout, ink, off: false, rollout: true };
    const rmax = largestWeight([r.rollout]);
    this.rolloutLegend.show(rmax);
    this.rolloutGrid.show([rollout], this.labels, rmax, Math.min(width, 240));
    this.keepZoom();
  }

  /** An enlarged map stays open with its head's new weights; a head the chosen model lacks closes it. */
  keepZoom() {
    if (this.zoom.node.hidden || !this.zoom.head) return;
    const all = [...this.grids.map((g) => g.grid), this.rolloutGrid];
    for (const grid of all) {
      const i = grid.heads.findIndex((h) => h.key === this.zoom.head.key);
      if (i >= 0) {
        grid.placeZoom(this.zoom.node, i);
        this.zoom.open(grid.heads[i], this.labels, grid.vmax, PIXEL_WORDS);
        return;
      }
    }
    this.closeZoom();
  }

  redraw() {
    this.pad.draw(this.root.clientWidth);
    this.draw();
  }

  /** The export (see View.exportFigure): the chosen model's heads on the pixels, everything in the JSON. */
  exportFigure() {
    const r = this.result;
    const m = r.models[this.primary];
    const heads = this.grids.flatMap(({ grid }) => grid.heads.map((h) => ({ label: h.label, map: h.map, off: false,
      tokens: this.labels })));
    const words = { model: this.primary, heads: headsText(this.heads[this.primary]), digit: m.prediction,
      p: m.probabilities[m.prediction].toFixed(2), label: r.label };
    const title = [t("Chapter 7's {model} ({heads}): [CLS]'s attention over the pixels", words),
      r.label === null || r.label === undefined ? t("Reads a {digit} (probability {p}) on a drawn digit", words)
        : t("Reads a {digit} (probability {p}) on a test digit, a {label}", words),
      t("Each map: rows and columns are the image's; colour 0 to {vmax}.", { vmax: this.vmax.toFixed(2) })];
    return { name: [this.primary, "digit"], title, heads, vmax: this.vmax,
      data: { view: "digit", model: this.primary, pixels: r.pixels, label: r.label ?? null, source: r.source,
        results: r.models } };
  }

  /**
   * Run every model on `pixels` (side * side grey levels in [0, 1], row by row, or {pixels}). Resolves
   * with the result of THIS input; the page draws it only if no later run or drawing came meanwhile.
   * Rejects, state kept, when the input does not fit (the message names the value).
   */
  async run(input) {
    let pixels;
    try {
      pixels = checkDigitInput(input, this.side * this.side);
    } catch (err) {
      throw this.refuse(err);
    }
    const label = input && typeof input === "object" && !Array.isArray(input) && Number.isInteger(input.label)
      ? input.label : null; // a test digit's label; a drawing has none
    this.requests += 1;
    const request = this.requests;
    let result;
    try {
      result = await this.compute((clock) => this.runModels(pixels, label, request, clock));
    } catch (err) {
      if (request === this.requests) this.root.classList.remove("mha-live-stale"); // the status says why
      throw err;
    }
    if (request === this.requests) {
      this.note(t("Recomputed {where} in {ms} ms.", { where: this.where, ms: Math.round(this.timings.run_ms) }));
    }
    return result;
  }

  /** Every model on `pixels`; the result is drawn when `request` is still the latest. */
  async runModels(pixels, label, request, clock) {
    const t0 = performance.now();
    const models = {};
    for (const model of this.models) models[model.id] = await runDigit(model, pixels, this.side, clock);
    const t1 = performance.now();
    this.timings.infer_ms = t1 - t0;
    const out = { pixels, label, models, source: this.backend.kind };
    if (request === this.requests) clock.time("draw", () => this.show(out));
    this.timings.draw_ms = clock.parts.draw_ms;
    return { ...out, tokens: this.labels, attentions: models[this.primary].cls, primary: this.primary };
  }
}

