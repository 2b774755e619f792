// view_patterns.mjs -- the "patterns" view (chapter 9): a sparse attention pattern the reader picks (every key,
// a sliding window with sinks, BigBird's blocks), run on the weights of chapter 5's or chapter 9's two-layer
// models on a token sequence the reader edits: the mask, every head's map, the next-token predictions, and the
// bytes a KV cache would hold for that pattern beside MHA, GQA, MQA and MLA.

import { patternCacheBytes, patternMask, runPatterns } from "./compute_toys.mjs";
import { checkArray, describeValue } from "./checks.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { HeadGrid } from "./draw.mjs";
import { largestWeight } from "./layout.mjs";
import { TOGGLE_DELAY_MS, View } from "./view.mjs";
import { fillPredictionStrip, sequenceControls } from "./view_induction.mjs";
import { t } from "./i18n.mjs";

/** The patterns' kinds, and each one's name in the menu (in the page's language). */
const KINDS = { full: () => t("every earlier key"), window: () => t("a sliding window"), sparse: () => t("BigBird's blocks") };
const BLOCKS = [2, 4, 8];
const MAX_SINKS = 8;

/** "1 key", "8 keys". */
const keysText = (n) => (n === 1 ? t("{n} key", { n }) : t("{n} keys", { n }));

/** A pattern in words: "a window of 8 keys and 2 sinks". */
export function describePattern(p) {
  if (p.kind === "window") {
    const words = { keys: keysText(p.window), sinks: p.sinks };
    return p.sinks ? t("a window of {keys} and the first {sinks} as sinks", words) : t("a window of {keys}", words);
  }
  if (p.kind === "sparse") return t("BigBird's pattern on blocks of {block}", { block: p.block });
  return t("every earlier key");
}

/** A family's label from the config (mha_lib.live.patterns.PATTERN_FAMILIES) in the page's language; another stays as it is. */
function weightsText(label) {
  const known = {
    "trained on every earlier key (chapter 5's model)": () => t("trained on every earlier key (chapter 5's model)"),
    "trained with a window of 4": () => t("trained with a window of 4"),
    "trained with a window of 8": () => t("trained with a window of 8"),
    "trained block-sparse, blocks of 4": () => t("trained block-sparse, blocks of 4"),
  };
  return Object.hasOwn(known, label) ? known[label]() : label;
}

const kb = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;

/** The keys each query may attend, as a map for the grid: 1 where key k is earlier than query q (or q itself)
 * and the pattern's mask (1 = blocked, L * L) leaves it open. */
export function allowedMap(mask, L) {
  return Array.from({ length: L }, (_, q) => Array.from({ length: L }, (_, k) => (k <= q && !mask[q * L + k] ? 1 : 0)));
}

/** "patterns": chapter 9's weights under a pattern the reader picks. */
export class PatternsView extends View {
  constructor(element, config, backend) {
    super(element, config, config.models.slice(), backend);
    this.task = config.task;
    this.labels = config.labels.slice();
    this.trained = config.trained.map((p) => ({ ...p }));
    this.layouts = config.layouts;
    this.cache = config.cache;
    this.modelIndex = config.model;
    this.pattern = { ...config.pattern };
    this.ids = config.ids.slice();
    /** @type {HTMLTextAreaElement|null} the sequence box (sequenceControls makes it) */
    this.box = null;
    this.firstActionText = t("Pick a pattern or other weights, or edit the sequence: the model reruns.");
    this.root.setAttribute("aria-label", t("Chapter 9's models under an attention pattern you pick, on a sequence you edit"));
    this.attach([this.buildControls()], [this.buildMaps()]);
    this.requests = 0;
    const readings = ["attentions", "predictions", "confidence", "previous", "induction", "copyable", "accuracy", "reach"];
    this.show({ ...Object.fromEntries(readings.filter((k) => config[k] !== undefined).map((k) => [k, config[k]])),
      ids: this.ids, model: this.modelIndex, pattern: { ...this.pattern }, source: "config" });
    this.later = debounce(() => this.run({}).catch(() => {}), TOGGLE_DELAY_MS);
  }

  buildControls() {
    const uid = Math.random().toString(36).slice(2);
    const L = this.task.seq_len;
    this.weights = el("select", { id: `mha-live-weights-${uid}` },
      ...this.labels.map((label, i) => el("option", { value: String(i) }, weightsText(label))));
    this.weights.addEventListener("change", () => {
      this.modelIndex = Number(this.weights.value);
      this.changed();
    });
    const own = el("button", { type: "button", class: "mha-live-button" }, t("Use the pattern these weights learned with"));
    own.addEventListener("click", () => {
      this.pattern = { ...this.trained[this.modelIndex] };
      this.changed();
    });
    this.kind = el("select", { id: `mha-live-kind-${uid}` },
      ...Object.entries(KINDS).map(([k, name]) => el("option", { value: k }, name())));
    this.kind.addEventListener("change", () => {
      this.pattern.kind = this.kind.value;
      this.changed();
    });
    const slider = (name, min, max) => {
      const input = el("input", { type: "range", id: `mha-live-${name}-${uid}`, min: String(min), max: String(max),
        step: "1" });
      const out = el("output", { for: input.id });
      input.addEventListener("input", () => {
        this.pattern[name] = Number(input.value);
        this.changed();
      });
      return { input, out };
    };
    this.window = slider("window", 1, L);
    this.sinks = slider("sinks", 0, MAX_SINKS);
    this.block = el("select", { id: `mha-live-block-${uid}` },
      ...BLOCKS.map((b) => el("option", { value: String(b) }, t("{n} tokens", { n: b }))));
    this.block.addEventListener("change", () => {
      this.pattern.block = Number(this.block.value);
      this.changed();
    });
    this.windowRow = el("div", { class: "mha-live-controls" },
      el("label", { for: this.window.input.id }, t("Window")), this.window.input, this.window.out,
      el("label", { for: this.sinks.input.id }, t("Sinks")), this.sinks.input, this.sinks.out);
    this.blockRow = el("div", { class: "mha-live-controls" }, el("label", { for: this.block.id }, t("Block")), this.block);
    this.setControls();
    return el("div", {}, ...sequenceControls(this),
      el("div", { class: "mha-live-controls" }, el("label", { for: this.weights.id }, t("Weights")), this.weights),
      el("div", { class: "mha-live-controls" }, el("label", { for: this.kind.id }, t("Each query sees")), this.kind, own),
      this.windowRow, this.blockRow);
  }

  /** The controls show the state (after a run() from code, or the pattern of the weights). */
  setControls() {
    const p = this.pattern;
    this.weights.value = String(this.modelIndex);
    this.kind.value = p.kind;
    this.window.input.value = String(p.window);
    this.sinks.input.value = String(p.sinks);
    this.block.value = String(p.block);
    setText(this.window.out, keysText(p.window));
    setText(this.sinks.out, `${p.sinks}`);
    this.windowRow.hidden = p.kind !== "window";
    this.blockRow.hidden = p.kind !== "sparse";
  }

  buildMaps() {
    this.scores = el("p", { class: "mha-live-scores", "aria-live": "polite" });
    this.bytes = el("table", { class: "mha-live-table" });
    this.maskGrid = new HeadGrid({ readout: this.readout, minMap: 130 });
    this.layers = el("div");
    this.grids = [];
    const captionId = `mha-live-strip-${Math.random().toString(36).slice(2)}`;
    this.strip = el("div", { class: "mha-live-strip mha-live-strip-wrap", role: "list", "aria-labelledby": captionId });
    return el("div", {}, this.scores,
      el("p", { class: "mha-live-note" }, t("The mask: a row per query, a column per key; bright where the query may " +
        "attend, dark where it may not (the pattern and the causal mask together).")), this.maskGrid.node,
      el("p", { class: "mha-live-note" }, t("What a decoder's KV cache would hold after this sequence (float16, both " +
        "layers), by how it stores keys and values:")), this.bytes,
      el("p", { class: "mha-live-strip-caption", id: captionId }, t("Under each position: the next token predicted. " +
        "Where copying gives the answer, ✓ marks it right, ✗ wrong (the copy's token under it); – elsewhere.")),
      this.strip,
      el("p", { class: "mha-live-note" }, t("Each head's map under the pattern (click a map to enlarge it).")),
      this.layers);
  }

  changed(soon = true) {
    this.requests += 1;
    this.root.classList.add("mha-live-stale");
    this.setControls();
    this.ensureModels().catch(() => {});
    if (soon) this.later();
    else this.run({}).catch(() => {});
  }

  show(result) {
    const L = result.ids.length;
    const allowed = allowedMap(patternMask(result.pattern, L, this.layouts), L);
    this.result = { ...result, tokens: result.ids.map(String), modelId: this.modelIds[result.model], allowed };
    this.root.classList.remove("mha-live-stale");
    const r = this.result;
    const right = r.copyable.filter((i) => r.predictions[i] === r.ids[i + 1]).length;
    const reach = r.reach.filter(Boolean).length;
    const words = { weights: weightsText(this.labels[r.model]), pattern: describePattern(r.pattern), right, count: r.copyable.length, reach };
    setText(this.scores, r.copyable.length
      ? t("Weights {weights}, each query seeing {pattern}: {right} of {count} positions that copying can predict are " +
        "right; for {reach} of them the key a copy needs is in sight.", words)
      : t("Weights {weights}, each query seeing {pattern}: no position of this sequence can be predicted by copying (no " +
        "pair of tokens occurs twice).", words));
    const bytes = patternCacheBytes(this.cache, r.pattern, L);
    const kept = r.pattern.kind === "window" ? t("this pattern (the window and its sinks)")
      : r.pattern.kind === "sparse" ? t("this pattern (BigBird keeps every key: a global or random block may need it)")
        : t("this pattern (every key)");
    const rows = [[t("every key, 4 key/value heads (MHA)"), bytes.mha], [kept, bytes.pattern],
      [t("2 key/value heads (GQA)"), bytes.gqa], [t("1 key/value head (MQA)"), bytes.mqa],
      [t("latent of {rank} + RoPE key of {rope} (MLA)", { rank: this.cache.kv_rank, rope: this.cache.rope_dim }), bytes.mla]];
    this.bytes.replaceChildren(el("tr", {}, el("th", {}, t("cache")), el("th", {}, t("bytes after {count} tokens", { count: L }))),
      ...rows.map(([name, b]) => el("tr", {}, el("td", {}, name), el("td", {}, `${b.toLocaleString("en-US")} (${kb(b)})`))));
    fillPredictionStrip(this.strip, r);
    this.draw();
  }

  draw() {
    const r = this.result;
    const width = this.layers.clientWidth || 600;
    this.maskGrid.show([{ key: "mask", label: t("mask: {pattern}", { pattern: describePattern(r.pattern) }), map: r.allowed }],
      r.tokens, 1, width);
    const vmax = largestWeight(r.attentions.flat());
    this.vmax = vmax;
    this.legend.show(vmax);
    r.attentions.forEach((layer, l) => {
      if (!this.grids[l]) {
        const grid = new HeadGrid({ readout: this.readout, minMap: 130 });
        grid.onEnlarge = (h) => {
          this.lastFocus = grid.buttons[h];
          this.enlarge(grid.heads[h], grid.tokens, grid.vmax, grid, h);
        };
        this.layers.append(el("p", { class: "mha-live-layer-title" }, t("layer {layer}", { layer: l })), grid.node);
        this.grids[l] = grid;
      }
      const heads = layer.map((map, h) => ({ key: `L${l}.H${h}`, label: `L${l}.H${h} · prev ${r.previous[l][h].toFixed(2)}`,
        map }));
      this.grids[l].show(heads, r.tokens, vmax, width);
    });
  }

  redraw() {
    this.draw();
    this.zoom.draw();
  }

  exportFigure() {
    const r = this.result;
    const heads = this.grids.flatMap((grid) => grid.heads.map((h) => ({ label: h.label, map: h.map, tokens: r.tokens })));
    const title = [t("{model}: {weights}, each query seeing {pattern}",
      { model: r.modelId, weights: weightsText(this.labels[r.model]), pattern: describePattern(r.pattern) }),
    t("Sequence: {ids}", { ids: r.ids.join(" ") }), t("Rows are queries, columns keys; colour 0 to {vmax}.", { vmax: this.vmax.toFixed(2) })];
    return { name: [r.modelId, r.pattern.kind], title, heads, vmax: this.vmax,
      data: { view: "patterns", model: r.modelId, pattern: r.pattern, ids: r.ids, source: r.source,
        predictions: r.predictions, copyable: r.copyable, reach: r.reach, accuracy: r.accuracy,
        attentions: r.attentions } };
  }

  /** run()'s input: {ids?, model?, pattern?}, each checked; what is not given stays. */
  checkInput(input) {
    if (!input || typeof input !== "object" || Array.isArray(input)) {
      throw new Error(`run() takes {ids, model, pattern}, got ${describeValue(input)}`);
    }
    const unknown = Object.keys(input).filter((k) => !["ids", "model", "pattern"].includes(k));
    if (unknown.length) throw new Error(`run() takes {ids, model, pattern}, got the keys [${Object.keys(input).join(", ")}]`);
    const { vocab_size: V, seq_len: L } = this.task;
    const fail = (what) => {
      throw new Error(`run(): ${what}`);
    };
    let ids = this.ids;
    if (input.ids !== undefined) {
      const token = (id, i) => (Number.isInteger(id) && id >= 0 && id < V ? id
        : fail(`ids[${i}] = ${describeValue(id)} is not a token id in 0..${V - 1}`));
      ids = checkArray(input.ids, { name: "ids", what: "tokens", item: token, fail });
      if (ids.length < 2 || ids.length > L) fail(`ids has ${ids.length} tokens; the model reads 2 to ${L}`);
    }
    const model = input.model === undefined ? this.modelIndex : input.model;
    if (!Number.isInteger(model) || model < 0 || model >= this.modelIds.length) {
      fail(`model = ${describeValue(model)} is not an index in 0..${this.modelIds.length - 1}`);
    }
    const pattern = { ...this.pattern, ...(input.pattern ?? {}) };
    if (input.pattern !== undefined && (typeof input.pattern !== "object" || Array.isArray(input.pattern)
      || input.pattern === null)) fail(`pattern = ${describeValue(input.pattern)} is not an object`);
    if (!(pattern.kind in KINDS)) fail(`pattern.kind = ${describeValue(pattern.kind)} is not one of full, window, sparse`);
    const inRange = (name, lo, hi) => {
      if (!Number.isInteger(pattern[name]) || pattern[name] < lo || pattern[name] > hi) {
        fail(`pattern.${name} = ${describeValue(pattern[name])} is not an integer in ${lo}..${hi}`);
      }
    };
    inRange("window", 1, L);
    inRange("sinks", 0, MAX_SINKS);
    if (!BLOCKS.includes(pattern.block)) fail(`pattern.block = ${describeValue(pattern.block)} is not one of ${BLOCKS}`);
    const extra = Object.keys(pattern).filter((k) => !["kind", "window", "sinks", "block"].includes(k));
    if (extra.length) fail(`pattern has unknown keys [${extra.join(", ")}]`);
    return { ids, model, pattern };
  }

  /** Run the chosen weights on ids under the pattern; resolves with this input's result. Rejects, state kept, on bad input. */
  async run(input) {
    let spec;
    try {
      spec = this.checkInput(input);
    } catch (err) {
      throw this.refuse(err);
    }
    Object.assign(this, { ids: spec.ids.slice(), modelIndex: spec.model, pattern: { ...spec.pattern } });
    if (document.activeElement !== this.box) this.box.value = this.ids.join(" ");
    this.setControls();
    this.requests += 1;
    const request = this.requests;
    let result;
    try {
      result = await this.compute(async (clock) => {
        const t0 = performance.now();
        const mask = clock.time("feeds", () => patternMask(spec.pattern, spec.ids.length, this.layouts));
        const readings = await runPatterns(this.models[spec.model], spec.ids, mask, clock);
        this.timings.infer_ms = performance.now() - t0;
        const out = { ...readings, ids: spec.ids, model: spec.model, pattern: spec.pattern, source: this.backend.kind };
        if (request === this.requests) clock.time("draw", () => this.show(out));
        return { ...out, tokens: spec.ids.map(String) };
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
