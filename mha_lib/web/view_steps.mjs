// view_steps.mjs -- the "steps" view (chapter 2): one head of one layer taken apart on the reader's sentence
// (all-MiniLM-L6-v2) or sequence (chapter 1's toy models): X -> Q, K, V -> Q K^T -> / sqrt(d_k) -> + mask ->
// softmax -> A V -> the heads concatenated -> W^O. Each step draws its matrices with their shapes; pointing at a
// cell (tapping it, or the arrow keys in a focused matrix) reads its value; Previous, Next and the step buttons
// move through the steps, and Play walks them (each step's result drawn row by row, except where the reader's
// system asks for reduced motion). The numbers are the layer's steps file's (steps.mjs), run on the layer's input.

import { checkStepsInput, headStages, markedText, runLayerInputs, runStepsFile, STEPS, stepMatrices, stepsFigure,
  stepsId } from "./steps.mjs";
import { el, setText } from "./dom.mjs";
import { divergingOf, colourOf } from "./layout.mjs";
import { bitmapOf, sizeCanvas } from "./draw.mjs";
import { shortLabel, truncationText, unknownText } from "./text.mjs";
import { t } from "./i18n.mjs";
import { hasWords } from "./wordpiece.mjs";
import { TOGGLE_DELAY_MS, TYPING_DELAY_MS, View } from "./view.mjs";

const MATRIX_FONT = "10px sans-serif";
const STEP_PLAY_MS = 2400; // Play: time on each step
const STEP_REVEAL_MS = 500; // a step's result drawn row by row over this time

/** Does the reader's system ask for reduced motion? */
function reducedMotion() {
  return typeof matchMedia === "function" && matchMedia("(prefers-reduced-motion: reduce)").matches;
}

/** A small colour bar for a matrix's scale: -vmax .. vmax (signed) or 0 .. vmax. */
function scaleBar(signed, vmax) {
  const canvas = el("canvas", { "aria-hidden": "true", class: "mha-live-scale" });
  const ctx = sizeCanvas(canvas, 60, 8);
  for (let x = 0; x < 60; x++) {
    const v = signed ? (x / 59 * 2 - 1) * vmax : x / 59 * vmax;
    const [r, g, b] = signed ? divergingOf(v, vmax) : colourOf(v, vmax);
    ctx.fillStyle = `rgb(${r},${g},${b})`;
    ctx.fillRect(x, 0, 1, 8);
  }
  return el("span", { class: "mha-live-scale-box" }, signed ? `−${vmax.toFixed(2)}` : "0", canvas, vmax.toFixed(2));
}

/** One matrix of a step: its caption (name, shape, scale) and a canvas whose cells read out on hover, tap or keys. */
class MatrixCanvas {
  constructor(view) {
    this.view = view;
    this.caption = el("p", { class: "mha-live-matrix-caption" });
    this.canvas = el("canvas", { tabindex: "0", role: "img" });
    this.box = el("div", { class: "mha-live-matrix-scroll" }, this.canvas);
    this.node = el("figure", { class: "mha-live-matrix" }, this.caption, this.box);
    this.cursor = null;
    this.width = 0; // px: the width it is drawn in (the view's layout sets it before the first draw)
    const point = (event) => {
      const at = this.cellAt(event);
      if (at) this.read(at.r, at.c);
    };
    this.canvas.addEventListener("pointermove", point);
    this.canvas.addEventListener("pointerdown", point); // a tap reads the cell (the matrices are drawn large enough)
    this.canvas.addEventListener("keydown", (event) => this.key(event));
  }

  /** What the rows and columns are: token labels, or feature numbers. */
  axes() {
    const m = this.m;
    const tokens = this.view.tokens;
    const dims = (n) => Array.from({ length: n }, (_, i) => String(i));
    const rows = m.rows === "tokens" ? tokens : dims(m.rows);
    const cols = m.colsAre === "tokens" ? tokens : dims(m.cols);
    return { rows, cols };
  }

  /** Draw `m` (stepMatrices' entry) in a box `width` px wide, its first `reveal` rows (all when null). */
  draw(m, width, reveal = null) {
    this.m = m;
    const { rows, cols } = this.axes();
    const n = rows.length;
    const probe = this.canvas.getContext("2d");
    probe.font = MATRIX_FONT;
    const labelW = (labels) => Math.ceil(Math.max(...labels.map((x) => probe.measureText(shortLabel(x, 10)).width)));
    const left = m.rows === "tokens" ? labelW(rows) + 6 : 20;
    const top = m.colsAre === "tokens" ? labelW(cols) + 6 : 4;
    const fit = Math.max(0.25, (width - left - 12) / cols.length); // a wide matrix fits the column (cells under 1 px)
    // W^O is drawn as its shape, at most 160 px a side; a matrix of features (K^T) keeps rows of at most 8 px
    const side = Math.min(160, width - left - 8);
    const cw = m.placeholder ? side / cols.length : Math.min(22, fit);
    const ch = m.placeholder ? side / n : m.rows === "tokens" ? Math.min(22, Math.max(cw, 12)) : Math.min(8, Math.max(cw, 3));
    this.layout = { left, top, cw, ch, n, m: cols.length };
    const w = Math.ceil(left + cw * cols.length + (m.colsAre === "tokens" ? 10 : 2)); // room for the last label
    const h = Math.ceil(top + ch * n + 2);
    const ctx = sizeCanvas(this.canvas, w, h);
    const shown = reveal === null ? n : Math.max(0, Math.min(n, reveal));
    if (m.placeholder) {
      ctx.fillStyle = "#d9d9d9";
      ctx.fillRect(left, top, cw * cols.length, ch * n);
      ctx.fillStyle = "#e66100";
      ctx.fillRect(left, top + ch * m.band.from, cw * cols.length, ch * (m.band.to - m.band.from));
    } else if (shown > 0) {
      const bitmap = bitmapOf(m.values, m.vmax, false, null, { map: m.values, signed: m.signed, vmax: m.vmax,
        blocked: m.blocked });
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(bitmap, 0, 0, cols.length, shown, left, top, cw * cols.length, ch * shown);
    }
    if (m.band && !m.placeholder) { // head h's columns of the concatenation
      ctx.lineWidth = 2;
      ctx.strokeStyle = "#e66100";
      ctx.strokeRect(left + cw * m.band.from, top - 1, cw * (m.band.to - m.band.from), ch * n + 2);
    }
    ctx.fillStyle = "#222";
    ctx.font = MATRIX_FONT;
    ctx.textBaseline = "middle";
    if (m.rows === "tokens" && ch >= 9) {
      ctx.textAlign = "right";
      rows.forEach((label, i) => ctx.fillText(shortLabel(label, 10), left - 4, top + (i + 0.5) * ch));
    }
    if (m.colsAre === "tokens" && cw >= 9) {
      ctx.textAlign = "left";
      cols.forEach((label, i) => {
        ctx.save();
        ctx.translate(left + (i + 0.5) * cw, top - 4);
        ctx.rotate(-Math.PI / 2);
        ctx.fillText(shortLabel(label, 10), 0, 0);
        ctx.restore();
      });
    }
    if (this.cursor && this.cursor.r < n && this.cursor.c < cols.length && document.activeElement === this.canvas) {
      ctx.lineWidth = 2;
      ctx.strokeStyle = "#000";
      ctx.strokeRect(left + this.cursor.c * cw - 1, top + this.cursor.r * ch - 1, cw + 2, ch + 2);
    }
    const shape = m.placeholder ? t("{rows} × {cols}", { rows: m.rows, cols: m.cols })
      : t("{rows} × {cols}", { rows: n, cols: cols.length });
    setText(this.caption, `${m.name} (${shape}) `);
    if (m.placeholder) {
      this.caption.append(el("span", { class: "mha-live-note" }, t("head {head}'s block of rows is marked",
        { head: this.view.result.head })));
    } else {
      this.caption.append(scaleBar(m.signed, m.vmax));
    }
    this.canvas.setAttribute("aria-label", m.placeholder
      ? t("{name}, {rows} rows by {cols} columns (its values are not shown)", { name: m.name, rows: m.rows, cols: m.cols })
      : t("{name}, {rows} rows by {cols} columns; focus it and use the arrow keys to read its cells",
        { name: m.name, rows: n, cols: cols.length }));
  }

  cellAt(event) {
    if (!this.layout || this.m.placeholder) return null;
    const { left, top, cw, ch, n, m } = this.layout;
    const box = this.canvas.getBoundingClientRect();
    const c = Math.floor((event.clientX - box.left - left) / cw);
    const r = Math.floor((event.clientY - box.top - top) / ch);
    return r >= 0 && c >= 0 && r < n && c < m ? { r, c } : null;
  }

  /** The readout of cell (r, c): "Q: row “she” (5), column 17: 0.532". */
  read(r, c) {
    const { rows, cols } = this.axes();
    const v = this.m.values[r][c];
    const row = this.m.rows === "tokens" ? t("token “{token}” ({i})", { token: rows[r], i: r }) : t("row {i}", { i: r });
    const col = this.m.colsAre === "tokens" ? t("token “{token}” ({i})", { token: cols[c], i: c }) : t("column {i}", { i: c });
    const value = Number.isFinite(v) ? v.toFixed(4) : t("−∞ (blocked)");
    const text = t("{matrix}: row {row}, column {column}: {value}", { matrix: this.m.name, row, column: col, value });
    setText(this.view.readout, text);
    this.view.lastCell = text;
  }

  key(event) {
    if (!this.layout || this.m.placeholder) return;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const { n, m } = this.layout;
    const at = this.cursor || { r: 0, c: 0 };
    const [dr, dc] = this.cursor ? moves[event.key] : [0, 0];
    this.cursor = { r: Math.min(n - 1, Math.max(0, at.r + dr)), c: Math.min(m - 1, Math.max(0, at.c + dc)) };
    this.draw(this.m, this.width);
    this.read(this.cursor.r, this.cursor.c);
  }
}

/** "steps": one head of one layer of MiniLM (or a toy model), step by step. */
export class StepsView extends View {
  constructor(element, config, backend) {
    const base = config.models[0];
    super(element, config, [base, stepsId(base, config.layer)], backend);
    this.base = base;
    this.kind = config.kind;
    this.sizes = { num_heads: config.num_heads, d_k: config.d_k, d_model: config.d_model };
    this.state = { layer: config.layer, head: config.head, causal: config.causal, text: config.text, ids: config.ids,
      types: config.types };
    this.step = 0;
    this.stepModels = new Map(); // steps id -> Promise<Model>
    this.cache = { key: null, outputs: null }; // the last run's outputs (every head): a head switch reads them
    this.firstActionText = this.kind === "bert"
      ? t("Type a sentence of your own, or pick another layer or head: the model reruns.")
      : t("Edit the sequence, or pick another head: the model reruns.");
    this.root.setAttribute("aria-label", t("One attention head computed step by step on your input"));
    this.legend.node.hidden = true; // each matrix shows its own scale
    const input = this.buildInput();
    const choices = this.buildChoices();
    this.stepBar = this.buildSteps();
    this.title = el("p", { class: "mha-live-step-title" });
    this.explain = el("p", { class: "mha-live-note mha-live-step-text" });
    this.matrices = el("div", { class: "mha-live-matrices" });
    this.shown = el("p", { class: "mha-live-shown" });
    this.attach([input, choices], [this.stepBar, this.shown, this.title, this.explain, this.matrices]);
    const stages = Object.fromEntries(["x", "q", "k", "v", "scores", "scaled", "blocked", "weights", "head_out", "concat",
      "contribution", "out"].map((k) => [k, config[k]]));
    this.result = this.resultOf({ ...this.state, tokens: config.tokens, stages, source: "config" });
    this.describeShown();
    this.drawStep();
  }

  get readoutHint() {
    return t("Point at a cell (or tap it, or focus a matrix and use the arrow keys) to read its value.");
  }

  get exportWhat() {
    return t("the head's stages");
  }

  /** The tokens of the result shown. */
  get tokens() {
    return this.result.tokens;
  }

  /** The text box (MiniLM) or the sequence box (a toy model). */
  buildInput() {
    const id = `mha-live-steps-${Math.random().toString(36).slice(2)}`;
    if (this.kind === "bert") {
      this.box = el("textarea", { id, rows: "2", spellcheck: "false" });
      this.box.value = this.state.text || "";
      const privacy = el("p", { class: "mha-live-privacy" }, this.backend.privacy);
      this.box.addEventListener("input", () => this.edited(TYPING_DELAY_MS));
      return el("div", {}, el("label", { for: id }, t("Your sentence")), this.box, ...this.englishModelNote(), privacy);
    }
    this.box = el("input", { id, type: "text", class: "mha-live-sequence-box", spellcheck: "false", autocomplete: "off" });
    this.box.value = markedText(this.state.ids, this.state.types);
    this.box.addEventListener("input", () => this.edited(TOGGLE_DELAY_MS));
    const V = this.config.task.vocab_size;
    return el("div", {}, el("label", { for: id, class: "mha-live-label" }, t("Your sequence")), this.box,
      el("p", { class: "mha-live-note" }, t("Tokens 0–{last} separated by spaces, 1 to {most} of them; a star marks x_m " +
        "(exactly one): “3 *5 1 0”.", { last: V - 1, most: this.config.max_tokens })));
  }

  /** The layer and head menus and the causal-mask box. */
  buildChoices() {
    const menu = (label, count, value, words) => {
      const id = `mha-live-steps-${label}-${Math.random().toString(36).slice(2)}`;
      const select = el("select", { id });
      for (let i = 0; i < count; i++) select.append(el("option", { value: String(i) }, words(i)));
      select.value = String(value);
      return { select, label: el("label", { for: id }, label === "layer" ? t("Layer") : t("Head")) };
    };
    const layer = menu("layer", this.config.num_layers, this.state.layer, (i) => t("layer {layer}", { layer: i }));
    const head = menu("head", this.config.num_heads, this.state.head, (i) => t("head {head}", { head: i }));
    this.layerMenu = layer.select;
    this.headMenu = head.select;
    this.causalBox = el("input", { type: "checkbox" });
    this.causalBox.checked = this.state.causal;
    this.layerMenu.addEventListener("change", () => this.run({ layer: Number(this.layerMenu.value) }).catch(() => {}));
    this.headMenu.addEventListener("change", () => this.run({ head: Number(this.headMenu.value) }).catch(() => {}));
    this.causalBox.addEventListener("change", () => this.run({ causal: this.causalBox.checked }).catch(() => {}));
    const nodes = this.config.num_layers > 1 ? [layer.label, layer.select] : [];
    return el("div", { class: "mha-live-controls" }, ...nodes, head.label, head.select,
      el("label", { class: "mha-live-check" }, this.causalBox, t("causal mask (as in a decoder)")));
  }

  /** Previous, the step buttons, Next and Play. */
  buildSteps() {
    this.prev = el("button", { type: "button", class: "mha-live-button" }, t("◀ Previous"));
    this.next = el("button", { type: "button", class: "mha-live-button" }, t("Next ▶"));
    this.playButton = el("button", { type: "button", class: "mha-live-button" }, t("Play"));
    this.prev.addEventListener("click", () => this.goTo(this.step - 1));
    this.next.addEventListener("click", () => this.goTo(this.step + 1));
    this.playButton.addEventListener("click", () => (this.playing ? this.stopPlay() : this.play()));
    this.chips = STEPS.map((s, i) => {
      const chip = el("button", { type: "button", class: "mha-live-button mha-live-step-chip", "aria-pressed": "false" }, s.chip);
      chip.addEventListener("click", () => this.goTo(i));
      return chip;
    });
    const chips = el("div", { class: "mha-live-step-chips", role: "group", "aria-label": t("the steps of the computation") },
      ...this.chips);
    return el("div", { class: "mha-live-steps" }, chips, el("div", { class: "mha-live-controls" }, this.prev, this.next,
      this.playButton));
  }

  /** The reader moves to step `i` (a step button, Previous, Next): Play stops. */
  goTo(i) {
    this.stopPlay();
    this.setStep(i);
  }

  setStep(i, animate = true) {
    this.step = Math.max(0, Math.min(STEPS.length - 1, i));
    this.clearReadout();
    this.drawStep(animate);
  }

  /** Play: every step in turn from the first (or from here), STEP_PLAY_MS each. */
  play() {
    this.playing = true;
    setText(this.playButton, t("Pause"));
    if (this.step === STEPS.length - 1) this.setStep(0);
    else this.drawStep(true);
    this.timer = setInterval(() => {
      this.setStep(this.step + 1);
      if (this.step >= STEPS.length - 1) this.stopPlay(); // the last step stays shown
    }, STEP_PLAY_MS);
  }

  stopPlay() {
    if (!this.playing) return;
    this.playing = false;
    clearInterval(this.timer);
    setText(this.playButton, t("Play"));
  }

  /** The title and explanation of the step shown, in the page's language. */
  stepWords() {
    const { head, layer } = this.result;
    const { d_k: dk, num_heads: H, d_model: d } = this.sizes;
    const L = this.tokens.length;
    const width = this.result.stages.concat[0].length;
    const words = { head, layer, dk, H, d, L, width, from: head * dk, to: (head + 1) * dk - 1,
      root: Math.sqrt(dk).toFixed(2) };
    const anyBlocked = this.result.stages.blocked.some((row) => row.some((v) => v));
    switch (STEPS[this.step].id) {
      case "input":
        return [t("X: the layer's input, {L} tokens × {d} numbers", words), this.kind === "bert"
          ? t("Each row is one token's vector: what layer {layer} reads (for layer 0, the token and position embeddings; " +
            "later, the output of the layer before). Every head of the layer reads the same X.", words)
          : t("Each row is one token's vector: the token and position embeddings after the block's LayerNorm (these " +
            "models normalise first). Every head of the layer reads the same X.", words)];
      case "project":
        return [t("Q, K, V: head {head}'s slices of the projections", words),
          t("Q = X W^Q_h + b^Q_h, and likewise K and V: head {head} owns columns {from}–{to} of W^Q, W^K and W^V, so its " +
            "queries, keys and values have d_k = {dk} numbers per token.", words)];
      case "scores":
        return [t("Q·Kᵀ: every query against every key", words),
          t("Entry (i, j) is the dot product of query i and key j: how well token i's query matches token j's key. One " +
            "matrix product gives all {L} × {L} of them.", words)];
      case "scale":
        return [t("÷ √d_k: scores of a size the softmax can use", words),
          t("Divided by √{dk} = {root}: the dot product of two vectors of d_k numbers grows with d_k, and the softmax " +
            "of large scores puts nearly all the weight on one key.", words)];
      case "mask":
        return [t("+ M: the mask", words), anyBlocked
          ? t("M is −∞ (grey) for every key after its query: a causal mask, as a decoder uses. After the softmax those " +
            "keys get weight 0.", words)
          : t("M is 0 everywhere here: one sequence without padding, read by an encoder, blocks nothing. Tick “causal " +
            "mask” to block every key after its query (−∞, grey), as a decoder does.", words)];
      case "softmax":
        return [t("softmax: each row becomes weights that sum to 1", words),
          t("A = softmax(S/√d_k + M), row by row: query i's weights over the keys. This is head {head}'s attention map " +
            "(the maps of the other views are these matrices).", words)];
      case "values":
        return [t("A · V: each query gets a weighted mix of the values", words),
          t("Row i of head{head} is Σ_j A[i, j] V[j]: the values of the keys that query i attends to, mixed by its " +
            "weights.", words)];
      case "concat":
        return [t("Concat: the {H} heads side by side", words),
          t("The {H} heads' outputs, {dk} numbers per token each, sit side by side in one {L} × {width} matrix; head " +
            "{head}'s block is outlined (columns {from}–{to}).", words)];
      default:
        return [t("· W^O: the output projection", words),
          t("output = Concat · W^O + b^O: the {width} × {d} matrix W^O mixes the heads. Head {head}'s block of rows of " +
            "W^O (marked) gives its own term, head{head} W^O_{head} (the last matrix): the output is the sum of the {H} " +
            "heads' terms plus the bias.", words)];
    }
  }

  /** Draw the step shown; `animate`: its result row by row (not where motion is reduced). */
  drawStep(animate = false) {
    this.chips.forEach((chip, i) => chip.setAttribute("aria-pressed", i === this.step ? "true" : "false"));
    this.prev.disabled = this.step === 0;
    this.next.disabled = this.step === STEPS.length - 1;
    const [title, text] = this.stepWords();
    setText(this.title, t("Step {nth} of {count}: {title}", { nth: this.step + 1, count: STEPS.length, title }));
    setText(this.explain, text);
    const list = stepMatrices(STEPS[this.step].id, this.result.stages, { head: this.result.head, ...this.sizes });
    this.canvases = this.canvases || [];
    while (this.canvases.length < list.length) this.canvases.push(new MatrixCanvas(this));
    const width = this.matrices.clientWidth || 600;
    const parts = [];
    list.forEach((m, i) => {
      const mc = this.canvases[i];
      mc.cursor = null;
      // a step's result takes the whole width on a phone; the other narrow matrices share a row, with room for the
      // operators between them
      const phone = width < 480;
      const wide = m.cols > 64 || list.length === 1 || (phone && m.result);
      const narrow = list.filter((x) => !(x.cols > 64 || (phone && x.result))).length || 1;
      mc.width = wide ? width : Math.min(width, Math.max(160, Math.floor((width - 48 * (narrow - 1)) / narrow)));
      mc.node.classList.toggle("mha-live-matrix-wide", wide);
      mc.node.style.width = wide ? "" : `${mc.width}px`; // its caption wraps inside, the row keeps its matrices
      mc.draw(m, mc.width, animate && m.result && !reducedMotion() ? 0 : null);
      parts.push(mc.node);
      if (m.op) parts.push(el("span", { class: "mha-live-op", "aria-hidden": "true" }, m.op));
    });
    this.matrices.replaceChildren(...parts);
    this.shownList = list;
    if (animate && !reducedMotion()) this.reveal(list);
  }

  /** Draw the results of the step row by row over STEP_REVEAL_MS (one frame at a time; a newer draw stops it). */
  reveal(list) {
    this.reveals = (this.reveals || 0) + 1;
    const run = this.reveals;
    const start = performance.now();
    const frame = (now) => {
      if (run !== this.reveals) return;
      const f = Math.min(1, (now - start) / STEP_REVEAL_MS);
      list.forEach((m, i) => {
        if (m.result) this.canvases[i].draw(m, this.canvases[i].width, Math.ceil(f * m.values.length));
      });
      if (f < 1) requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
  }

  redraw() {
    this.reveals = (this.reveals || 0) + 1; // a resize draws the step whole
    this.drawStep(false);
  }

  /** The caption: whose stages these are (dimmed while the box holds a text whose stages are coming). */
  describeShown(pending = false) {
    const r = this.result;
    const input = this.kind === "bert" ? shortLabel(r.text || "", 90) : markedText(r.ids, r.types);
    this.root.classList.toggle("mha-live-stale", pending);
    setText(this.shown, pending
      ? t("Still the stages of “{input}” (layer {layer}, head {head}): those of your input follow once the model has read it.",
        { input, layer: r.layer, head: r.head })
      : t("The stages of “{input}”, layer {layer}, head {head}{causal}.", { input, layer: r.layer, head: r.head,
        causal: r.causal ? t(", causal mask") : "" }));
  }

  /** The input box changed: the model loads (first time), then reruns after `delay` ms of quiet. */
  edited(delay) {
    this.describeShown(true);
    this.ensureModels().catch(() => {});
    clearTimeout(this.typing);
    this.typing = setTimeout(() => {
      this.run(this.kind === "bert" ? { text: this.box.value } : this.box.value).catch(() => {});
    }, delay);
  }

  /** The steps file of `layer`, loaded once (after the view's first models). */
  loadSteps(layer) {
    const id = stepsId(this.base, layer);
    if (!this.stepModels.has(id)) {
      const promise = this.backend.loadModel(id, () => {});
      promise.catch(() => this.stepModels.delete(id));
      this.stepModels.set(id, promise);
    }
    return this.stepModels.get(id);
  }

  /** What lastResult holds: the state, the tokens, the stages (HEAD_STAGES) and the map as attentions [[A]]. */
  resultOf(r) {
    return { ...r, model: this.base, attentions: [[r.stages.weights]] };
  }

  /**
   * Run the model on `input` (a text, a toy sequence, or {text | ids, types, layer, head, causal}) and show the
   * stages. Refuses a bad input (the stages stay); a run overtaken by a newer one draws nothing.
   */
  async run(input) {
    let want;
    try {
      want = checkStepsInput(input, this.config, { ...this.state, text: this.kind === "bert" ? this.box.value : undefined,
        ids: this.result.ids || this.state.ids, types: this.result.types || this.state.types });
    } catch (err) {
      this.syncControls();
      throw this.refuse(err);
    }
    if (this.kind === "bert" && !hasWords(want.text)) {
      this.note(t("The text is empty (nothing the tokenizer keeps): type a sentence. The stages show the last one."));
      throw new Error("empty text");
    }
    this.state = { ...this.state, ...want };
    this.syncControls();
    if (this.kind === "bert" && this.box.value !== want.text) this.box.value = want.text;
    if (this.kind === "toy" && typeof input !== "string") this.box.value = markedText(want.ids, want.types);
    this.modelIds[1] = stepsId(this.base, want.layer); // what a first action before any load fetches
    this.requests = (this.requests || 0) + 1;
    const request = this.requests;
    let out;
    try {
      out = await this.compute(async () => {
        const [model] = await this.ensureModels();
        const stepsModel = await this.loadSteps(want.layer);
        let ids;
        let types = null;
        let enc = null;
        if (this.kind === "bert") {
          enc = model.tokenizer.encode(want.text);
          ids = enc.ids;
        } else {
          ids = want.ids;
          types = want.types;
        }
        const key = JSON.stringify([ids, types, want.layer, want.causal]);
        let outputs = this.cache.key === key ? this.cache.outputs : null;
        if (!outputs) {
          const li = await runLayerInputs(model, ids, types, this.onFetch);
          const [, , L, d] = li.dims;
          const hidden = li.data.subarray(want.layer * L * d, (want.layer + 1) * L * d);
          outputs = await runStepsFile(stepsModel, hidden, L, d, want.causal);
        }
        if (request !== this.requests) return { stale: true };
        this.cache = { key, outputs };
        const tokens = enc ? enc.tokens : ids.map((id, i) => (types[i] ? `*${id}` : String(id)));
        return this.resultOf({ layer: want.layer, head: want.head, causal: want.causal, tokens,
          ...(enc ? { text: want.text, truncated: enc.truncated, fullLength: enc.fullLength } : { ids, types }),
          stages: headStages(outputs, want.head), source: this.backend.kind });
      });
    } catch (err) { // the stages shown stay, and the menus say whose they are
      const r = this.result;
      this.state = { ...this.state, layer: r.layer, head: r.head, causal: r.causal };
      this.syncControls();
      this.describeShown(false);
      throw err;
    }
    if (out.stale) return this.result;
    this.result = out;
    this.describeShown(false);
    this.drawStep(true);
    const said = out.truncated ? truncationText(out.text, out.fullLength, out.tokens.length)
      : t("{count} tokens, recomputed {where} in {ms} ms.", { count: out.tokens.length, where: this.where,
        ms: Math.round(this.timings.run_ms) });
    this.note(`${said}${this.kind === "bert" ? unknownText(out.tokens) : ""}`);
    return out;
  }

  /** The menus and the box show the state asked for (or, after a refusal, the one shown). */
  syncControls() {
    this.layerMenu.value = String(this.state.layer);
    this.headMenu.value = String(this.state.head);
    this.causalBox.checked = this.state.causal;
  }

  exportFigure() {
    const r = this.result;
    return stepsFigure({ model: this.base, layer: r.layer, head: r.head, causal: r.causal, tokens: r.tokens,
      input: this.kind === "bert" ? r.text : markedText(r.ids, r.types), stages: r.stages, source: r.source,
      sizes: this.sizes });
  }
}
