// view_sentence.mjs -- the "sentence" view: MiniLM (all-MiniLM-L6-v2) on a sentence the reader types,
// every head of a layer (or of all six layers), recomputed as they type.

import { runBert } from "./compute_bert.mjs";
import { describeValue } from "./checks.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { errorText, formatMB, headsText, layersText, mapsOfText, shortLabel, truncationText, unknownText } from "./text.mjs";
import { t } from "./i18n.mjs";
import { hasWords } from "./wordpiece.mjs";
import { LayerMaps } from "./layer_maps.mjs";
import { linesMode } from "./head_view.mjs";
import { MINILM, TYPING_DELAY_MS, View } from "./view.mjs";

const PREFETCH_DELAY_MS = 60; // the word vectors of the text being typed are fetched after this pause

/** "sentence": MiniLM on the reader's text. */
export class SentenceView extends View {
  constructor(element, config, backend) {
    super(element, config, [element.dataset.model || MINILM], backend);
    this.firstActionText = t("Type a sentence of your own: the model reruns as you type.");
    const id = `mha-live-text-${Math.random().toString(36).slice(2)}`;
    // no maxlength: the box keeps all the reader gives; the status says how much of it the model reads
    this.text = el("textarea", { id, rows: "2", spellcheck: "false" });
    this.text.value = config.text || "";
    const label = el("label", { for: id }, t("Your sentence"));
    const privacy = el("p", { class: "mha-live-privacy" }, this.backend.privacy);
    this.maps = new LayerMaps(this, config.attentions.length, config.layer || 0, config.roles);
    this.root.setAttribute("aria-label", t("Live attention maps of all-MiniLM-L6-v2 for a sentence you type"));
    this.shown = el("p", { class: "mha-live-shown" }); // whose maps these are (dimmed while they are an older text's)
    this.lines = linesMode(this); // the heads as lines between the tokens (BertViz's head view), or as maps
    this.attach([el("div", {}, label, this.text, ...this.englishModelNote(), privacy, ...this.ownModelInput()),
      this.lines.control, this.maps.control.node],
      [this.shown, this.maps.node, this.lines.node]);
    this.result = { tokens: config.tokens, attentions: config.attentions, text: config.text, source: "config" };
    this.describeShown();
    this.maps.control.update();
    this.maps.show(config.tokens, config.attentions, null, config.text || "");
    const later = debounce(() => this.run(this.text.value).catch(() => {}), TYPING_DELAY_MS);
    const prefetch = debounce(() => this.prefetch(this.text.value), PREFETCH_DELAY_MS);
    this.text.addEventListener("input", () => {
      this.describeShown(); // the maps shown are now the previous text's
      this.ensureModels().catch(() => {}); // the first keystroke starts the download (or the kernel's load)
      prefetch();
      later();
    });
  }

  /**
   * While the reader types: the word vectors of the text so far are fetched (a model whose token rows are files),
   * so that the run after the typing delay finds them (no fetch on its critical path). Errors are the run's to say.
   */
  prefetch(text) {
    const model = this.current;
    if (!model?.tokenizer || !hasWords(text)) return;
    model.prepare([model.tokenizer.encode(text).ids]).catch(() => {});
  }

  /**
   * "Your own model": an .onnx file from the reader's disk that reads the sentence instead of MiniLM, and a
   * button back. Only where the page runs the models (the book); the kernel's view runs the notebook's.
   */
  ownModelInput() {
    if (!this.backend.loadOwnBert) return [];
    this.backButton = el("button", { type: "button", class: "mha-live-button", hidden: "" }, t("Back to the book's model"));
    this.backButton.addEventListener("click", () => this.useBookModel().catch(() => {}));
    return [this.modelFilePicker(t("Read it with your own model: an .onnx file that mha_lib.export.export_onnx wrote " +
      "from a BertEncoder with MiniLM's vocabulary (MiniLM fine-tuned, or with the same number of heads pruned in " +
      "every layer; BERT-base uncased). It is read here, never uploaded."),
    (file) => this.useOwnModel(file).catch(() => {})), this.backButton];
  }

  /** The model reading the text: the reader's own, or MiniLM. */
  get current() {
    return this.own || (this.models ? this.models[0] : null);
  }

  get where() {
    return this.backend.whereFor && this.current ? this.backend.whereFor([this.current]) : this.backend.where;
  }

  get shownModelId() {
    return this.result.model || this.modelIds[0]; // the maps drawn, not a run still computing
  }

  /**
   * Read the reader's model file, check it (runtime_browser.mjs: loadOwnBert) and let it read the text in
   * the box from now on. Resolves to its id (the file name). A file that is refused, or that cannot read the
   * text, leaves the view as it was (model, maps, layer) and says why in the status; a newer pick or "Back"
   * while this one loads wins, and this one is dropped.
   */
  async useOwnModel(file) {
    this.picks = (this.picks || 0) + 1;
    const pick = this.picks;
    await this.ensureModels(); // MiniLM's tokenizer reads the text for the reader's model too (its own errors)
    let model;
    try {
      this.note(t("Reading “{name}” ({size}) in your browser…", { name: file.name, size: formatMB(file.size) }));
      model = await this.backend.loadOwnBert(file.name, await file.arrayBuffer(), this.models[0].tokenizer);
    } catch (err) {
      if (pick === this.picks) this.refuseModel(err);
      throw err;
    }
    if (pick !== this.picks) { // the reader picked another file, or went back, meanwhile
      this.backend.releaseModel(model);
      throw new Error(`“${file.name}” was replaced by a later choice`);
    }
    const before = this.own;
    this.own = model;
    if (hasWords(this.text.value)) {
      try {
        await this.run(this.text.value);
      } catch (err) {
        if (pick === this.picks) { // it runs, but not on this text: the model and the maps stay as they were
          this.own = before;
          this.backend.releaseModel(model);
          this.refuseModel(err);
        }
        throw err;
      }
    }
    if (before && before !== model) this.backend.releaseModel(before);
    this.backButton.hidden = false;
    const { num_layers: NL, num_heads: H } = model.info;
    const words = { name: file.name, layers: layersText(NL), heads: headsText(H), where: this.where };
    this.note((hasWords(this.text.value)
      ? t("Your model “{name}” ({layers}, {heads} each) reads the text {where}, with MiniLM's tokenizer; its file " +
        "was not uploaded.", words)
      : t("Your model “{name}” ({layers}, {heads} each) reads the next text you type, in your browser, with MiniLM's " +
        "tokenizer; its file was not uploaded.", words)) + unknownText(this.result.tokens));
    return file.name;
  }

  refuseModel(err) {
    this.status.classList.add("mha-live-error");
    setText(this.status, t("Your model was not used: {reason}.", { reason: errorText(err) }));
  }

  /** Back to MiniLM: its maps of the text in the box (a file still loading is dropped). */
  async useBookModel() {
    this.picks = (this.picks || 0) + 1;
    if (this.own) this.backend.releaseModel(this.own);
    this.own = null;
    this.backButton.hidden = true;
    if (!hasWords(this.text.value)) return this.result;
    return this.run(this.text.value);
  }

  /**
   * The caption above the maps: the text they belong to. While the box holds another text whose maps are
   * coming (`pending`), the maps are dimmed and the caption says they are the previous text's.
   */
  describeShown(pending = true) {
    const text = this.result.text || "";
    const short = shortLabel(text, 90);
    const stale = pending && this.text.value !== text;
    const words = { text: short, model: this.result.model };
    this.root.classList.toggle("mha-live-stale", stale);
    if (this.result.own) {
      setText(this.shown, stale ? t("Still the maps of “{text}” by your model “{model}”: those of your text follow once " +
        "the model has read it.", words) : t("The maps of “{text}” by your model “{model}”.", words));
    } else {
      setText(this.shown, stale ? t("Still the maps of “{text}”: those of your text follow once the model has read it.",
        words) : mapsOfText(short));
    }
  }

  redraw() {
    this.maps.draw();
    this.zoom.draw();
    this.lines.draw();
  }

  /** The export: the lines where they are shown, else the maps (View's). */
  exportFigure() {
    return this.lines.active ? this.lines.exportFigure() : super.exportFigure();
  }

  /**
   * Run the model (MiniLM, or the reader's own) on `text` and draw every map. Rejects on empty text (the maps
   * stay). A run overtaken by a newer one resolves to what is shown and draws nothing.
   */
  async run(text) {
    if (typeof text !== "string") throw this.refuse(new Error(`run(text) takes a string, got ${describeValue(text)}`));
    if (!hasWords(text)) {
      this.describeShown(this.text.value !== text); // still dimmed if the box holds a newer text
      this.note(t("The text is empty (nothing the tokenizer keeps): type a sentence. The maps show the last one."));
      throw new Error("empty text");
    }
    if (this.text.value !== text) this.text.value = text; // the box shows the text of the maps
    this.requests = (this.requests || 0) + 1;
    const request = this.requests;
    let out;
    try {
      out = await this.compute(async (clock) => {
        const model = this.current;
        const current = () => request === this.requests; // a newer run (maybe of another model) draws instead
        const draws = []; // each layer's maps are drawn as soon as they are computed (one frame per layer)
        const r = await runBert(model, [text], null, { onFetch: this.onFetch, clock, stale: () => !current(),
          onWait: (l, bytes) => this.busy(t("Fetching layer {layer} of the model ({size}), then computing {where}…",
            { layer: l, size: formatMB(bytes), where: this.where })),
          onTokens: (encodings) => {
            if (!current()) return;
            this.maps.setLayerCount(model.info.num_layers); // the reader's own model may have more or fewer layers
            this.maps.useBookRoles(!model.info.own); // the measured roles are the book model's heads'
            this.maps.begin(encodings[0].tokens, model.info.num_layers, null, text);
            if (model.layerReady) { // split by layer: a layer whose file is not in yet lets earlier ones stand in
              const waiting = Array.from({ length: model.info.num_layers }, (_, l) => l).find((l) => !model.layerReady(l));
              if (waiting !== undefined) this.maps.fetching(waiting);
            }
          },
          onLayer: (l, maps) => {
            if (current()) draws.push(this.maps.setLayer(l, maps));
          } });
        if (!r || !current()) return { stale: true };
        await Promise.all(draws);
        this.maps.commit();
        this.lines.show();
        const enc = r.encodings[0];
        this.timings.draw_ms = clock.parts.draw_ms;
        this.timings.infer_ms = performance.now() - clock.started - clock.parts.draw_ms;
        return { tokens: enc.tokens, attentions: r.attentions, text, truncated: enc.truncated,
          fullLength: enc.fullLength, source: this.backend.kind, model: model.id, own: Boolean(model.info.own) };
      });
    } catch (err) {
      // the last maps stay, undimmed unless a newer text is waiting; the status says why this one failed
      this.describeShown(this.text.value !== text);
      throw err;
    }
    if (out.stale) return this.result; // what is shown: the newer run's, once it ends
    this.result = out;
    this.describeShown();
    const said = out.truncated ? truncationText(text, out.fullLength, out.tokens.length)
      : t("{count} tokens, recomputed {where} in {ms} ms.",
        { count: out.tokens.length, where: this.where, ms: Math.round(this.timings.run_ms) });
    this.note(`${said}${unknownText(out.tokens)}`);
    return out;
  }
}
