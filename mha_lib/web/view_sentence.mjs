// view_sentence.mjs -- the "sentence" view: MiniLM (all-MiniLM-L6-v2) on a sentence the reader types,
// every head of a layer (or of all six layers), recomputed as they type.

import { runBert } from "./compute.mjs";
import { describeValue } from "./checks.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { shortLabel, truncationText, unknownText } from "./text.mjs";
import { hasWords } from "./wordpiece.mjs";
import { LayerMaps } from "./layer_maps.mjs";
import { MINILM, TYPING_DELAY_MS, View } from "./view.mjs";

/** "sentence": MiniLM on the reader's text. */
export class SentenceView extends View {
  constructor(element, config, backend) {
    super(element, config, [element.dataset.model || MINILM], backend);
    this.firstActionText = "Type a sentence of your own: the model reruns as you type.";
    const id = `mha-live-text-${Math.random().toString(36).slice(2)}`;
    // no maxlength: the box keeps all the reader gives; the status says how much of it the model reads
    this.text = el("textarea", { id, rows: "2", spellcheck: "false" });
    this.text.value = config.text || "";
    const label = el("label", { for: id }, "Your sentence");
    const privacy = el("p", { class: "mha-live-privacy" }, this.backend.privacy);
    this.maps = new LayerMaps(this, config.attentions.length, config.layer || 0);
    this.root.setAttribute("aria-label", "Live attention maps of all-MiniLM-L6-v2 for a sentence you type");
    this.shown = el("p", { class: "mha-live-shown" }); // whose maps these are (dimmed while they are an older text's)
    this.attach([el("div", {}, label, this.text, privacy), this.maps.control.node], [this.shown, this.maps.node]);
    this.result = { tokens: config.tokens, attentions: config.attentions, text: config.text, source: "config" };
    this.describeShown();
    this.maps.control.update();
    this.maps.show(config.tokens, config.attentions, null, config.text || "");
    const later = debounce(() => this.run(this.text.value).catch(() => {}), TYPING_DELAY_MS);
    this.text.addEventListener("input", () => {
      this.describeShown(); // the maps shown are now the previous text's
      this.ensureModels().catch(() => {}); // the first keystroke starts the download (or the kernel's load)
      later();
    });
  }

  /**
   * The caption above the maps: the text they belong to. While the box holds another text whose maps are
   * coming (`pending`), the maps are dimmed and the caption says they are the previous text's.
   */
  describeShown(pending = true) {
    const text = this.result.text || "";
    const short = shortLabel(text, 90);
    const stale = pending && this.text.value !== text;
    this.root.classList.toggle("mha-live-stale", stale);
    setText(this.shown, stale ? `Still the maps of “${short}”: those of your text follow once the model has read it.`
      : `The maps of “${short}”.`);
  }

  redraw() {
    this.maps.draw();
    this.zoom.draw();
  }

  /** Run MiniLM on `text` and draw every map. Rejects on empty text (the maps stay). */
  async run(text) {
    if (typeof text !== "string") throw this.refuse(new Error(`run(text) takes a string, got ${describeValue(text)}`));
    if (!hasWords(text)) {
      this.describeShown(this.text.value !== text); // still dimmed if the box holds a newer text
      this.note("The text is empty (nothing the tokenizer keeps): type a sentence. The maps show the last one.");
      throw new Error("empty text");
    }
    if (this.text.value !== text) this.text.value = text; // the box shows the text of the maps
    let out;
    try {
      out = await this.compute(async () => {
        const t0 = performance.now();
        const r = await runBert(this.models[0], [text], null, this.onFetch);
        const t1 = performance.now();
        const enc = r.encodings[0];
        await this.maps.show(enc.tokens, r.attentions, null, text);
        this.timings.infer_ms = t1 - t0;
        this.timings.draw_ms = performance.now() - t1;
        return { tokens: enc.tokens, attentions: r.attentions, text, truncated: enc.truncated,
          fullLength: enc.fullLength, source: this.backend.kind };
      });
    } catch (err) {
      // the last maps stay, undimmed unless a newer text is waiting; the status says why this one failed
      this.describeShown(this.text.value !== text);
      throw err;
    }
    this.result = out;
    this.describeShown();
    const said = out.truncated ? truncationText(text, out.fullLength, out.tokens.length)
      : `${out.tokens.length} tokens, recomputed ${this.where} in ${Math.round(this.timings.run_ms)} ms.`;
    this.note(`${said}${unknownText(out.tokens)}`);
    return out;
  }
}
