// view_toy_compare.mjs -- the "toy-compare" view: chapter 1's task read by the 1-, 2-, 4- and 8-head
// models side by side; the reader changes tokens and moves the mark, and sees maps and predictions.

import { markedTokens, prevMarkedLabels, runToy } from "./compute.mjs";
import { checkToyInput } from "./checks.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { errorText, formatMB, headsText, layersText } from "./text.mjs";
import { t } from "./i18n.mjs";
import { HeadGrid } from "./draw.mjs";
import { largestWeight } from "./layout.mjs";
import { TOGGLE_DELAY_MS, View } from "./view.mjs";

/** "toy-compare": chapter 1's task read by several toy models at once. */
export class ToyCompareView extends View {
  constructor(element, config, backend) {
    super(element, config, config.models.slice(), backend);
    this.primary = config.models.includes(element.dataset.model) ? element.dataset.model : config.models[0];
    this.firstActionText = t("Change a token or move the mark: every model reruns.");
    this.task = config.task; // mha_lib's PrevMarkedTask.to_dict(): {kind, vocab_size, seq_len, op}
    this.ids = config.ids.slice();
    this.types = config.types.slice();
    this.root.setAttribute("aria-label", t("Live attention maps and predictions of the toy models on a sequence you edit"));
    this.editor = this.buildEditor();
    this.sections = config.models.map((id) => this.buildSection(id));
    const most = Math.max(...config.models.map((id) => config.results[id].attentions[0].length));
    this.sections.forEach((s) => { s.grid.sameSizeAs = most; });
    this.attach([this.editor], this.sections.map((s) => s.node));
    this.scrollRows = []; // the editor and every model's prediction strip (a model the reader adds, too)
    for (const row of [this.sequence, ...this.sections.map((s) => s.strip)]) this.linkScroll(row);
    this.requests = 0; // every run() and edit counts; only the latest one's result is drawn
    this.showAll(this.describe(config.results, this.ids, this.types, "config"));
    const later = debounce(() => this.run({ ids: this.ids, types: this.types }).catch(() => {}), TOGGLE_DELAY_MS);
    this.changed = () => {
      this.requests += 1; // a run in flight is now out of date: its result is not drawn
      this.ensureModels().catch(() => {});
      this.refreshEditor();
      later();
    };
  }

  buildEditor() {
    const V = this.task.vocab_size;
    const rows = el("div", { class: "mha-live-sequence", role: "group", "aria-label": t("the sequence: tokens and the mark") });
    this.selects = [];
    this.marks = [];
    const name = `mha-live-mark-${Math.random().toString(36).slice(2)}`;
    this.ids.forEach((token, i) => {
      const select = el("select", { "aria-label": t("token at position {i}", { i }) });
      for (let v = 0; v < V; v++) select.append(el("option", { value: String(v) }, String(v)));
      select.value = String(token);
      select.addEventListener("change", () => {
        this.ids[i] = Number(select.value);
        this.changed();
      });
      const mark = el("input", { type: "radio", name, "aria-label": t("mark position {i}", { i }) });
      mark.checked = this.types[i] === 1;
      mark.addEventListener("change", () => {
        this.types = this.types.map((_, j) => (j === i ? 1 : 0));
        this.changed();
      });
      this.selects.push(select);
      this.marks.push(mark);
      // the radio's label is its 44 x 44 px touch target
      rows.append(el("div", { class: "mha-live-position" }, el("span", {}, String(i)), select,
        el("label", { class: "mha-live-mark" }, mark)));
    });
    this.rule = el("p", { class: "mha-live-note" });
    const help = el("p", { class: "mha-live-note" },
      t("Pick a token at any position, and the marked position with the round buttons. " +
      "Each model predicts every position's label; ✓ right, ✗ wrong."));
    // on a narrow screen the positions scroll sideways: say so, exactly then (the row's own size decides, from its
    // first layout on: the view's redraw() runs only when the column's width changes after the view is built)
    this.scrollHint = el("p", { class: "mha-live-note", hidden: "" }, t("Scroll the row sideways for all {count} " +
      "positions; the predictions below scroll the same way.", { count: this.ids.length }));
    this.sequence = rows;
    new ResizeObserver(() => {
      this.scrollHint.hidden = rows.scrollWidth <= rows.clientWidth + 1;
    }).observe(rows);
    return el("div", {}, help, rows, this.scrollHint, this.rule, ...this.ownModelInput());
  }

  /**
   * "Your own model": an .onnx file from the reader's disk, run beside the book's models. Only where the
   * page runs the models (the book); the kernel's view runs the notebook's models.
   */
  ownModelInput() {
    if (!this.backend.loadOwnModel) return [];
    return [this.modelFilePicker(t("Add your own model: an .onnx file that mha_lib.export.export_onnx wrote from a " +
      "chapter-1 model (it is read here, never uploaded)"), (file) => this.addOwnModel(file).catch(() => {}))];
  }

  /** On a narrow screen the editor and the prediction strips scroll sideways: `row` scrolls with every row linked. */
  linkScroll(row) {
    this.scrollRows.push(row);
    row.addEventListener("scroll", () => {
      for (const other of this.scrollRows) if (other !== row && other.scrollLeft !== row.scrollLeft) other.scrollLeft = row.scrollLeft;
    }, { passive: true });
  }

  refreshEditor() {
    this.selects.forEach((s, i) => { s.value = String(this.ids[i]); });
    this.marks.forEach((m, i) => { m.checked = this.types[i] === 1; });
    const m = this.types.indexOf(1);
    setText(this.rule, t("Label at position i: (token i−1 {op} marked token) mod {vocab}; the marked token is {token}, " +
      "at position {m}.", { op: this.task.op === "add" ? "+" : "−", vocab: this.task.vocab_size, token: this.ids[m], m }));
  }

  buildSection(id) {
    const title = el("p", { class: "mha-live-model-title" });
    const grid = new HeadGrid({ readout: this.readout, minMap: 128 });
    const captionId = `mha-live-strip-${Math.random().toString(36).slice(2)}`;
    const caption = el("p", { class: "mha-live-strip-caption", id: captionId },
      t("prediction at each position (✓ right, ✗ wrong)"));
    // same columns as the sequence editor above: position i's prediction sits under token i
    const strip = el("div", { class: "mha-live-strip", role: "list", "aria-labelledby": captionId });
    const node = el("div", { class: "mha-live-model" }, title, grid.node, caption, strip);
    grid.onEnlarge = (h) => {
      this.lastFocus = grid.buttons[h];
      this.enlarge(grid.heads[h], grid.tokens, grid.vmax, grid, h);
    };
    return { id, title, grid, strip, node };
  }

  /**
   * Read the reader's model file, check it against the toy models' contract (its inputs and outputs, then
   * its outputs' shapes on the sequence shown), and add it as one more model, drawn and scored with the
   * others. Resolves to its id (the file name); rejects, the view unchanged, with the reason in the status.
   */
  async addOwnModel(file) {
    try {
      if (this.modelIds.includes(file.name)) throw new Error(t("a model named “{name}” is already shown", { name: file.name }));
      await this.ensureModels();
      this.note(t("Reading “{name}” ({size}) in your browser…", { name: file.name, size: formatMB(file.size) }));
      const model = await this.backend.loadOwnModel(file.name, await file.arrayBuffer(), { ids: this.ids, types: this.types });
      const trial = await runToy(model, this.ids, this.types);
      const L = this.ids.length;
      if (trial.classes !== this.task.vocab_size || trial.attentions[0][0].length !== L) {
        throw new Error(t("“{name}” gives {classes} classes and maps of {tokens} tokens on this sequence; chapter 1's " +
          "task needs {vocab} classes and {length} tokens", { name: file.name, classes: trial.classes,
          tokens: trial.attentions[0][0].length, vocab: this.task.vocab_size, length: L }));
      }
      const section = this.buildSection(model.id);
      this.sections[this.sections.length - 1].node.after(section.node);
      this.sections.push(section);
      this.linkScroll(section.strip);
      this.modelIds.push(model.id);
      this.models.push(model);
      const most = Math.max(...this.sections.map((s) => s.grid.sameSizeAs || 1), model.info.num_layers * model.info.num_heads);
      this.sections.forEach((s) => { s.grid.sameSizeAs = most; });
    } catch (err) {
      this.status.classList.add("mha-live-error");
      setText(this.status, t("Your model was not added: {reason}.", { reason: errorText(err) }));
      throw err;
    }
    await this.run({ ids: this.ids, types: this.types });
    const { num_layers: NL, num_heads: H } = this.models[this.models.length - 1].info;
    this.note(t("Your model “{name}” ({layers}, {heads}) runs in your browser beside the book's; its file was not " +
      "uploaded.", { name: file.name, layers: layersText(NL), heads: headsText(H) }));
    return file.name;
  }

  /**
   * The result of one input: every model's maps and predictions, with the task's labels.
   * results: {id: {attentions, predictions, confidence}}; ids, types: the input they were computed on.
   */
  describe(results, ids, types, source) {
    const tokens = markedTokens(ids, types);
    const labels = prevMarkedLabels(ids, types, this.task);
    const models = {};
    for (const id of this.modelIds) {
      const r = results[id];
      const correct = r.predictions.map((p, i) => (labels[i] === null ? null : p === labels[i]));
      models[id] = { tokens, attentions: r.attentions, predictions: r.predictions, confidence: r.confidence,
        labels, correct };
    }
    return { tokens, attentions: models[this.primary].attentions, ids: ids.slice(), types: types.slice(), models, source };
  }

  /** Draw a result of describe() (every model's maps and predictions); it becomes lastResult. */
  showAll(result) {
    this.refreshEditor();
    const vmax = largestWeight(this.sections.flatMap((s) => result.models[s.id].attentions.flat()));
    this.legend.show(vmax);
    this.vmax = vmax;
    for (const s of this.sections) {
      const r = result.models[s.id];
      const H = r.attentions[0].length;
      const heads = r.attentions.flatMap((layer, l) => layer.map((map, h) => ({
        label: `${s.id} ${r.attentions.length > 1 ? `L${l}.` : ""}H${h}`, map, off: false })));
      s.grid.show(heads, result.tokens, vmax);
      const right = r.correct.filter((c) => c === true).length;
      const asked = r.correct.filter((c) => c !== null).length;
      setText(s.title, t("{model}: {heads}, {right} of {asked} positions right", { model: s.id, heads: headsText(H), right, asked }));
      s.strip.replaceChildren(...r.predictions.map((p, i) => {
        const c = r.correct[i];
        const cell = el("span", { role: "listitem", class: c === null ? "" : c ? "mha-live-right" : "mha-live-wrong" });
        setText(cell, c === null ? "–" : `${p}${c ? "✓" : "✗"}`);
        const words = { i, p, label: r.labels[i] };
        cell.setAttribute("aria-label", c === null ? t("position {i}: no label", words)
          : c ? t("position {i}: predicts {p}, the label is {label}, right", words)
            : t("position {i}: predicts {p}, the label is {label}, wrong", words));
        return cell;
      }));
    }
    this.result = result;
  }

  /** The export (see View.exportFigure): every model's heads on the sequence shown, predictions in the JSON. */
  exportFigure() {
    const r = this.result;
    const heads = this.sections.flatMap((s) => s.grid.heads.map((h) => ({ ...h, tokens: s.grid.tokens })));
    const title = [t("Chapter 1's toy models {models}: every head", { models: this.modelIds.join(t(", ")) }),
      t("Sequence: {ids} (marked position {m})", { ids: r.ids.join(" "), m: r.types.indexOf(1) }),
      t("Rows are queries, columns keys; colour 0 to {vmax}.", { vmax: this.vmax.toFixed(2) })];
    return { name: ["toy", ...this.modelIds], title, heads, vmax: this.vmax,
      data: { view: "toy-compare", models: this.modelIds.slice(), ids: r.ids, types: r.types, source: r.source,
        results: r.models } };
  }

  redraw() {
    for (const s of this.sections) s.grid.draw();
    this.zoom.draw();
  }

  /**
   * Run every model on {ids, types} (types: 1 at the marked position). Resolves with the result of
   * THIS input; the page draws it only if no later run() or edit came meanwhile (the last one asked
   * for is the one shown, and lastResult). Rejects, state kept, when the input does not fit (the
   * message names the offending value).
   */
  async run(input) {
    let checked;
    try {
      checked = checkToyInput(input, this.ids.length, this.task.vocab_size); // copies, kept by this call
    } catch (err) {
      throw this.refuse(err);
    }
    const { ids, types } = checked;
    this.ids = ids.slice();
    this.types = types.slice();
    this.requests += 1;
    const request = this.requests;
    const result = await this.compute(async (clock) => {
      const t0 = performance.now();
      const out = {};
      for (const model of this.models) out[model.id] = await runToy(model, ids, types, clock);
      const t1 = performance.now();
      this.timings.infer_ms = t1 - t0;
      const described = clock.time("read", () => this.describe(out, ids, types, this.backend.kind));
      if (request === this.requests) clock.time("draw", () => this.showAll(described));
      this.timings.draw_ms = clock.parts.draw_ms;
      return described;
    });
    if (request === this.requests) {
      this.note(t("Recomputed {where} in {ms} ms.", { where: this.where, ms: Math.round(this.timings.run_ms) }));
    }
    return result;
  }
}
