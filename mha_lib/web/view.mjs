// view.mjs -- what every live view shares: its status line, the download or load, the readout bar,
// the enlarged map, the fallback figure, and element.mhaLive (the contract of the tests).
//
// A view talks to its backend through this interface only (runtime_browser.mjs: onnxruntime-web in the
// page; runtime_kernel.mjs: the notebook's kernel):
//   kind                      "browser" | "kernel": element.mhaLive.backend and lastResult.source
//   timesHere                 whether the timing view can time this backend's runtime (the browser's: yes)
//   where, who, madeWhen,     words of the view's texts, in the page's language: "in your browser", "The model",
//   privacy                   "the book was built", what happens to typed text
//   whereFor(models)          optional: `where` with what ran the models ("in your browser (WebGPU)")
//   providerName(models)      optional: "WebAssembly", "WebGPU" or both, for the timing view's label
//   providers()               optional: Promise<{chosen: {ep, why}, gpu: {ok, software, why}}> (the speed table)
//   about(modelIds)           {lead, parts: [{label, detail, href}]}: the "what runs here" line
//   firstTimeText(ids, note)  Promise<string>: what the first action fetches (note(info): a split
//                             model's word vectors); rejects where the view cannot run here
//   load(ids, show)           Promise<Model[]>, telling show.start(bytes, text), show.bytes(got, total, text)
//   loadedText(ids, seconds), loadFailedText(message)
//   onLoaded(listener)        listener() when another view loads something (what is left changes)
// A Model is {id, info, tokenizer, session: {inputNames, run(feeds), provider?}, ort: {Tensor}, queue,
// prepare(ids, onFetch), layer?(i, onWait) -> Promise<session>, stream?()}; compute.mjs and compute_bert.mjs run it.
// A model split by layer (the browser's MiniLM) has layer(): its session is the embeddings', and layer i's session
// (inputs hidden, key_padding_mask, head_mask) is fetched and made when first asked; stream() starts fetching the
// layers not yet asked for, one after another.

import { Clock, debugAsked } from "./clock.mjs";
import { fetchedFiles } from "./fetch_files.mjs";
import { browserBackend } from "./runtime_browser.mjs";
import { Legend, ZoomView, bitmapOf, figureCanvas } from "./draw.mjs";
import { fileName, figureCsv, figureSvg } from "./figure.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { errorText, formatMB, shortLabel } from "./text.mjs";
import { pageLanguage, sentences, t } from "./i18n.mjs";
import { nextLoadState } from "./view_state.mjs";

export const MINILM = "all-MiniLM-L6-v2";
export const TYPING_DELAY_MS = 300; // debounce of the text box
export const TOGGLE_DELAY_MS = 120; // debounce of head toggles and token edits

/**
 * What exportFigure() returns and figure.mjs draws: name: file-name parts; title: lines; heads: [{label, tokens, map,
 * off}]; vmax: the colour scale's top; data: the JSON export (each view its own keys); a figure that is not a grid of
 * maps brings toCanvas() and toSvg(); columns: the CSV's header of a figure of other matrices.
 * @typedef {{name: string[], title: string[], heads: object[], vmax: number, data: object,
 *   toCanvas?: () => HTMLCanvasElement, toSvg?: () => string, columns?: string[]}} Figure
 */

/** What every view shares: status line, download, readout, fallback, the test contract. */
export class View {
  constructor(element, config, modelIds, backend = browserBackend) {
    this.element = element;
    this.config = config;
    this.modelIds = modelIds;
    this.backend = backend;
    this.result = null;
    this.fallback = element.querySelector(".mha-live-fallback");
    this.root = el("div", { class: "mha-live", role: "group" });
    this.status = el("p", { class: "mha-live-status", role: "status" });
    this.about = el("p", { class: "mha-live-about" }); // which browsers, which model and runtime, their licences
    this.progress = el("progress", { hidden: "", max: "1", value: "0", "aria-label": t("download progress") });
    this.readout = el("p", { class: "mha-live-readout", "aria-live": "polite" }, this.readoutHint);
    this.legend = new Legend();
    // the colour scale and the readout stay in sight (sticky) while the reader points at the maps below
    this.bar = el("div", { class: "mha-live-bar" }, this.legend.node, this.readout);
    this.zoom = new ZoomView({ readout: this.readout, onClose: () => this.closeZoom() });
    this.timings = {};
    /** @type {string} where the models are: idle, loading, loaded or failed (view_state.mjs: the moves allowed) */
    this.loadState = "idle";
    /** @type {Promise<any>|null} the load in flight or done (null while idle, and after a failed one) */
    this.loadPromise = null;
    /** @type {string} the status line's invitation before the first action (each view sets its own) */
    this.firstActionText = "";
    /** @type {HTMLElement|null} the map button the enlarged map came from (focus goes back to it on close) */
    this.lastFocus = null;
    /** @type {any} the views with a layer's maps (sentence, prune): their LayerMaps (layer_maps.mjs) */
    this.maps = null;
    // runBert's progress callback: a split model fetching the word vectors of new words
    this.onFetch = (n, bytes) => this.busy(t("Fetching word vectors ({files} files, {size}), then computing {where}…",
      { files: n, size: formatMB(bytes), where: this.where }));
  }

  /**
   * Put the view on the page: the line saying what runs here, its controls, then the status line (download size, progress,
   * messages), the colour scale, the cell readout and the enlarged map, then the maps and the download buttons. The
   * fallback figure is hidden while the live view works.
   */
  attach(controls, maps) {
    // the "what runs here" line first (seen before trying) and the download buttons last: neither sits,
    // for the Tab key, between the controls and the maps
    this.root.append(this.about, ...controls, this.status, this.progress, this.bar, this.zoom.node, ...maps,
      this.exportBar());
    this.element.append(this.root);
    this.stickUnderHeader();
    for (const note of this.element.querySelectorAll(".mha-live-noscript")) note.hidden = true;
    if (this.fallback) this.fallback.hidden = true;
    // redrawn when the column's width changes (a window resized, a phone turned); not when the view's own
    // content changes its height (a status line, another layer drawn), which would redraw every map again
    // (the width drawn for is the one now: 0 while the view is not yet on the page, as in a widget's render)
    let width = Math.round(this.root.getBoundingClientRect().width);
    const redraw = debounce(() => this.redraw(), 100);
    new ResizeObserver((entries) => {
      const now = Math.round(entries[entries.length - 1].contentRect.width);
      if (now !== width) {
        width = now;
        redraw();
      }
    }).observe(this.root);
    this.describeRuntime();
    this.announceSize();
    // another view of the page that loads the runtime or a model changes what this one will download
    this.backend.onLoaded(() => {
      if (this.mayAnnounce()) this.announceSize();
    });
  }

  /**
   * The "what runs here" line, always visible: in the book, the browsers that run the view (WebAssembly SIMD),
   * the model(s) and the runtime with links to their licence notices (links once the manifest is read).
   */
  describeRuntime() {
    const { lead, parts } = this.backend.about(this.modelIds);
    const children = [lead];
    parts.forEach((part, i) => {
      if (i) children.push(" · ");
      children.push(part.label);
      const inner = [part.detail, part.href ? el("a", { href: part.href }, t("licence")) : ""].filter((x) => x);
      if (inner.length) children.push(t(" ("), ...inner.flatMap((x, j) => (j ? [t("; "), x] : [x])), t(")"));
    });
    this.about.replaceChildren(...children);
  }

  /** Before any download: what the first action will fetch (the backend says, in megabytes). */
  async announceSize() {
    let text;
    try {
      text = await this.backend.firstTimeText(this.modelIds, (info) => this.wordVectorsNote(info));
    } catch (err) {
      this.fail(err); // this browser cannot run the view
      return;
    }
    this.describeRuntime(); // the licence links, once the manifest is read
    if (this.mayAnnounce()) setText(this.status, sentences(this.firstActionText, text));
  }

  /** Move to another load state (view_state.mjs throws on a move it does not allow). */
  setLoadState(to) {
    this.loadState = nextLoadState(this.loadState, to);
  }

  /** Load every model of the view once, showing the bytes received. After a failure, only "Try again" retries. */
  ensureModels() {
    if (this.loadState === "failed") return Promise.reject(this.error);
    if (!this.loadPromise) {
      const started = performance.now();
      this.attempt = (this.attempt || 0) + 1;
      const attempt = this.attempt;
      const show = {
        start: (bytes, text) => {
          this.describeRuntime(); // licence links, if they were missing
          this.progress.hidden = bytes === 0;
          setText(this.status, text);
        },
        bytes: (got, total, text) => {
          if (this.loadState === "failed" || attempt !== this.attempt) return; // a file that failed stops the count
          this.progress.max = total;
          this.progress.value = got;
          setText(this.status, text);
        },
      };
      this.setLoadState("loading");
      this.loadPromise = this.backend.load(this.modelIds, show).then((models) => {
        this.loadedModels(models, started);
        setText(this.status, this.backend.loadedText(this.modelIds, this.timings.load_ms / 1000));
        return models;
      });
      this.loadPromise.catch((err) => {
        this.loadPromise = null;
        this.fail(err, true);
      });
    }
    return this.loadPromise;
  }

  /** The models are loaded: the live maps replace the figure that a failure showed. */
  loadedModels(models, started) {
    this.models = models;
    this.setLoadState("loaded");
    this.status.classList.remove("mha-live-error");
    this.progress.hidden = true;
    if (this.fallback) this.fallback.hidden = true;
    this.timings.load_ms = performance.now() - started;
  }

  /** A visible message, and the static figure comes back; `retry` offers a "Try again" button. */
  fail(err, retry = false) {
    this.setLoadState("failed");
    this.error = err instanceof Error ? err : new Error(String(err));
    this.progress.hidden = true;
    this.status.classList.add("mha-live-error");
    const when = this.backend.madeWhen;
    setText(this.status, sentences(this.backend.loadFailedText(this.error.message), this.fallback
      ? t("The maps shown are the ones computed when {when}, as is the figure below.", { when })
      : t("The maps shown are the ones computed when {when}.", { when })));
    if (retry) {
      const again = el("button", { type: "button", class: "mha-live-button" }, t("Try again"));
      again.addEventListener("click", () => {
        this.setLoadState("idle");
        this.note(t("Trying again…"));
        this.ensureModels().catch(() => {});
      });
      this.status.append(" ", again);
    }
    if (this.fallback) this.fallback.hidden = false;
  }

  /** The download note may (re)write the status: nothing loads or failed yet, and no message of a run() is shown. */
  mayAnnounce() {
    return this.loadState === "idle" && !this.spoke;
  }

  /**
   * An input run() refuses: a visible error naming the value; the maps and the state stay as they were.
   * @returns {Error} err, for the caller to throw
   */
  refuse(err) {
    this.spoke = true;
    this.root.classList.remove("mha-live-stale"); // the maps shown are the last result's, as the status says
    this.status.classList.add("mha-live-error");
    setText(this.status, t("This input was refused: {reason}. The maps show the last result.", { reason: err.message }));
    return err;
  }

  /**
   * On a Chinese page, the views of MiniLM (sentence, prune) say once, beside the sentence, what its English
   * vocabulary does to Chinese text (wordpiece.mjs, as BERT's BasicTokenizer: one token per CJK character, [UNK]
   * for a character not in it); an English page shows nothing. Returns the nodes to add: none, or the note.
   */
  englishModelNote() {
    if (pageLanguage() !== "zh") return [];
    return [el("p", { class: "mha-live-note mha-live-language" }, t("all-MiniLM-L6-v2 was trained on English text and " +
      "its vocabulary is English (uncased BERT's WordPiece): Chinese text is split into single characters, one token " +
      "each, and every character missing from its vocabulary (many are: it holds 244 Chinese characters) becomes " +
      "[UNK]. The maps show those tokens, so an English sentence gives maps worth reading."))];
  }

  /** What the readout says before a cell is pointed at (a view of other maps says other words). */
  get readoutHint() {
    return t("Point at a cell to read its query token, key token and weight; click a map to enlarge it. On a touch " +
      "screen, tap a map to enlarge it, then tap a cell.");
  }

  /** The readout's hint again: the cell it named belongs to maps no longer shown (new input, other layer). */
  clearReadout() {
    setText(this.readout, this.readoutHint);
  }

  /** A message that keeps the maps (empty text, truncation). */
  note(text) {
    this.spoke = true;
    this.status.classList.remove("mha-live-error");
    setText(this.status, text);
  }

  /**
   * The theme's sticky header (sphinx-book-theme's article header) covers the top of the window: the
   * readout bar sticks under it, and scrolling to the enlarged map leaves room for both (--mha-live-top).
   */
  stickUnderHeader() {
    let top = 0;
    for (const header of document.querySelectorAll(".bd-header-article, .bd-header")) {
      const style = getComputedStyle(header);
      if ((style.position === "sticky" || style.position === "fixed") && style.display !== "none") {
        top = Math.max(top, header.getBoundingClientRect().height);
      }
    }
    this.root.style.setProperty("--mha-live-top", `${Math.ceil(top)}px`);
  }

  /** Enlarge `head` under the row of the clicked map (grid.buttons[index]), keyboard focus in it. */
  enlarge(head, tokens, vmax, grid, index) {
    if (grid) grid.placeZoom(this.zoom.node, index);
    this.zoom.open(head, tokens, vmax, grid ? grid.words : undefined);
    this.zoom.canvas.focus({ preventScroll: true });
    this.zoom.node.scrollIntoView({ block: "nearest" });
  }

  closeZoom() {
    this.zoom.node.hidden = true;
    if (this.lastFocus) this.lastFocus.focus();
  }

  /**
   * What a split model (token rows in files) fetches besides its file, for the download note:
   * for each new text, the row files of its words (the range the build measured on its check texts).
   */
  wordVectorsNote(info) {
    const files = info.checked?.row_files_per_text;
    if (!files) return t(", then the word vectors of the words of each new text");
    const bytes = info.token_rows.file_bytes;
    return t(", then the word vectors of the words of each new text (a median {median} over the build's test " +
      "sentences, at most {max})", { median: formatMB(files.median * bytes), max: formatMB(files.max * bytes) });
  }

  /** While work runs: "Fetching the word vectors…" when rows download, else "Computing…" after a moment. */
  busy(text) {
    if (!this.status.classList.contains("mha-live-error")) setText(this.status, text);
  }

  /**
   * Run `work(clock)` (a Promise-returning function; clock: a Clock of clock.mjs, given to the run functions) after
   * the models load; keep the timings: run_ms (the whole update) and parts (where its time went).
   */
  async compute(work) {
    await this.ensureModels();
    this.status.classList.remove("mha-live-error"); // a refused input's message gives way to this run's
    const t0 = performance.now();
    const clock = new Clock();
    this.clock = clock; // the maps' drawing adds to it (LayerMaps.draw)
    let result;
    const slow = setTimeout(() => this.busy(t("Computing {where}…", { where: this.where })), 150); // no flicker for fast runs
    this.running = (this.running || 0) + 1;
    this.root.classList.add("mha-live-busy"); // the scores shown are the last run's until every run ends
    const done = () => {
      clearTimeout(slow);
      this.running -= 1;
      if (!this.running) this.root.classList.remove("mha-live-busy");
    };
    try {
      result = await work(clock);
    } catch (err) {
      done();
      if (this.clock === clock) this.clock = null;
      this.status.classList.add("mha-live-error");
      setText(this.status, t("{who} could not compute this input ({error}). The maps show the last result.",
        { who: this.backend.who, error: errorText(err) }));
      throw err;
    }
    done();
    this.timings.run_ms = performance.now() - t0;
    this.timings.parts = clock.done();
    if (this.clock === clock) this.clock = null;
    this.showDebug();
    return result;
  }

  /**
   * ?mha-debug=1 in the page's address: a line under the status with the last update's parts (clock.mjs), the
   * load, and the files fetched (from the network or the cache). For developers and benchmarks: English only.
   */
  showDebug() {
    if (!debugAsked()) return;
    if (!this.debug) {
      this.debug = el("p", { class: "mha-live-note mha-live-debug" });
      this.status.after(this.debug);
    }
    const p = this.timings.parts;
    const ms = (x) => x.toFixed(1);
    const files = fetchedFiles.filter((f) => !f.cached);
    const kept = fetchedFiles.length - files.length;
    const mb = files.reduce((s, f) => s + f.bytes, 0) / 1e6;
    setText(this.debug, p ? `update ${ms(p.total_ms)} ms: feeds ${ms(p.feeds_ms)} · load ${ms(p.load_ms)} · run ${ms(p.run_ms)} ` +
      `(${p.runs.length} calls: ${p.runs.map(ms).join(" ")}) · read ${ms(p.read_ms)} · draw ${ms(p.draw_ms)} · other ` +
      `${ms(p.other_ms)}. First load ${this.timings.load_ms ? ms(this.timings.load_ms) : "–"} ms. This page fetched ` +
      `${mb.toFixed(2)} MB in ${files.length} files, and read ${kept} from the cache.` : "");
  }

  /** The export buttons: the maps shown as PNG or SVG, their numbers as CSV or JSON, in one click each. */
  exportBar() {
    const buttons = ["PNG", "SVG", "CSV", "JSON"].map((kind) => {
      const button = el("button", { type: "button", class: "mha-live-button",
        "aria-label": t("Download {what} as {kind}", { what: this.exportWhat, kind }) }, kind);
      button.addEventListener("click", () => this.download(kind.toLowerCase()).catch((err) => {
        this.status.classList.add("mha-live-error");
        setText(this.status, t("The {kind} file could not be made ({error}).", { kind, error: errorText(err) }));
      }));
      return button;
    });
    return el("div", { class: "mha-live-export" }, el("span", {}, t("Download {what}:", { what: this.exportWhat })), ...buttons);
  }

  /** What the export bar downloads, in words (a view of other figures says other words). */
  get exportWhat() {
    return t("the maps shown");
  }

  /**
   * A file picker for the reader's own .onnx file, labelled `text` (read in the page, never uploaded):
   * `onFile(file)` on each pick (the same file can be picked again). Returns its paragraph.
   */
  modelFilePicker(text, onFile) {
    const id = `mha-live-own-${Math.random().toString(36).slice(2)}`;
    const input = el("input", { type: "file", id, accept: ".onnx" });
    input.addEventListener("change", () => {
      const file = input.files?.[0];
      input.value = "";
      if (file) onFile(file);
    });
    return el("p", { class: "mha-live-note" }, el("label", { for: id, class: "mha-live-check" }, text), input);
  }

  /** The model whose maps are shown (the export names it): the view's first. */
  get shownModelId() {
    return this.modelIds[0];
  }

  /**
   * What the maps shown are, for the export (figure.mjs): {name: file-name parts, title: lines naming the
   * model, the input, the layer(s) and heads, heads: [{label, tokens, map, off}], vmax, data: the JSON}.
   * The views with LayerMaps (sentence, prune) share this one; the toy view has its own.
   * @returns {Figure}
   */
  exportFigure() {
    const heads = this.maps.shownHeads();
    const layers = [...new Set(heads.map((h) => `L${h.layer}`))];
    const input = this.maps.input; // the text of the maps drawn, not of a run still computing
    const off = heads.filter((h) => h.off).map((h) => h.label);
    const model = this.shownModelId;
    const count = heads.length;
    const scale = t("Rows are queries, columns keys; colour 0 to {vmax}.", { vmax: this.maps.vmax.toFixed(2) });
    const title = [layers.length > 1
      ? t("{model}: attention of layers {layers} ({count} heads)", { model, layers: layers.join(t(", ")), count })
      : t("{model}: attention of layer {layer} ({count} heads)", { model, layer: layers[0], count }),
    t("Input: “{input}”", { input: shortLabel(input, 120) }),
    off.length ? sentences(t("Turned off: {heads}.", { heads: off.join(" ") }), scale) : scale];
    return { name: [model, ...layers], title, heads, vmax: this.maps.vmax,
      data: { view: this.element.dataset.view, model, text: input, tokens: heads[0].tokens,
        source: this.result.source, heads: heads.map((h) => ({ label: h.label, off: h.off, attention: h.map })),
        ...(this.exportScores(heads) || {}) } };
  }

  /** The prune view's scores, when they belong to the heads drawn (not while a toggle's run is pending). */
  exportScores(heads) {
    const r = this.result;
    if (r.fidelity === undefined || !r.mask) return null;
    const drawn = heads.every((h) => !r.mask[h.layer][h.head] === h.off);
    return drawn ? { fidelity: r.fidelity, mrr: r.mrr, mask: r.mask } : null;
  }

  /** Make the file of `kind` ("png", "svg", "csv", "json") from exportFigure() and let the browser save it. */
  async download(kind) {
    const figure = this.exportFigure();
    let blob;
    // a figure that is not a grid of maps (the sentence view's lines) brings its own canvas and SVG
    if (kind === "png") {
      const canvas = figure.toCanvas ? figure.toCanvas() : figureCanvas(figure);
      blob = await new Promise((resolve, reject) => canvas.toBlob(
        (b) => (b ? resolve(b) : reject(new Error("the browser made no PNG"))), "image/png"));
    } else if (kind === "svg") {
      const svg = figure.toSvg ? figure.toSvg()
        : figureSvg(figure, (head) => bitmapOf(head.map, figure.vmax, head.off, null, head).toDataURL("image/png"));
      blob = new Blob([svg], { type: "image/svg+xml" });
    } else if (kind === "csv") {
      blob = new Blob([figureCsv(figure)], { type: "text/csv" });
    } else {
      blob = new Blob([JSON.stringify(figure.data)], { type: "application/json" });
    }
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: fileName(figure.name, kind), hidden: "" });
    this.root.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    return link.download;
  }

  /**
   * Where the maps are computed, for the notes: "in your browser" (with the execution provider that ran this
   * view's models: "in your browser (WebGPU)") or "by the notebook's kernel".
   */
  get where() {
    return this.backend.whereFor ? this.backend.whereFor(this.models || []) : this.backend.where;
  }

  /** Draw again at the column's width now (attach() calls it when the width changes); each view draws its own. */
  redraw() {}

  /**
   * Update the view for `input` (each view says what it takes); resolves once the maps show it.
   * @returns {Promise<any>}
   */
  async run(input) {
    throw new Error(`the ${this.element.dataset.view} view has no run(${JSON.stringify(input)})`);
  }

  /** element.mhaLive, the contract of the tests. */
  api(view, model) {
    const self = this;
    return {
      view,
      model,
      models: this.modelIds.slice(),
      backend: this.backend.kind,
      run: (input) => self.run(input),
      get lastResult() {
        return self.result;
      },
      get timings() {
        return { ...self.timings };
      },
      get loaded() {
        return self.loadState === "loaded";
      },
    };
  }
}
