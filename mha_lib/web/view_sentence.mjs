// view_sentence.mjs -- the "sentence" view: MiniLM (all-MiniLM-L6-v2) on a sentence the reader types,
// every head of a layer (or of all six layers), recomputed as they type.

import { runBert } from "./compute.mjs";
import { describeValue } from "./checks.mjs";
import { debounce, el } from "./dom.mjs";
import { truncationText } from "./text.mjs";
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
    this.attach([el("div", {}, label, this.text, privacy), this.maps.control.node], [this.maps.node]);
    this.result = { tokens: config.tokens, attentions: config.attentions, text: config.text, source: "config" };
    this.maps.control.update();
    this.maps.show(config.tokens, config.attentions);
    const later = debounce(() => this.run(this.text.value).catch(() => {}), TYPING_DELAY_MS);
    this.text.addEventListener("input", () => {
      this.ensureModels().catch(() => {}); // the first keystroke starts the download (or the kernel's load)
      later();
    });
  }

  redraw() {
    this.maps.draw();
    this.zoom.draw();
  }

  /** Run MiniLM on `text` and draw every map. Rejects on empty text (the maps stay). */
  async run(text) {
    if (typeof text !== "string") throw this.refuse(new Error(`run(text) takes a string, got ${describeValue(text)}`));
    if (!hasWords(text)) {
      this.note("The text is empty (nothing the tokenizer keeps): type a sentence. The maps show the last one.");
      throw new Error("empty text");
    }
    if (this.text.value !== text) this.text.value = text; // the box shows the text of the maps
    const out = await this.compute(async () => {
      const t0 = performance.now();
      const r = await runBert(this.models[0], [text], null, this.onFetch);
      const t1 = performance.now();
      const enc = r.encodings[0];
      this.maps.show(enc.tokens, r.attentions);
      this.timings.infer_ms = t1 - t0;
      this.timings.draw_ms = performance.now() - t1;
      return { tokens: enc.tokens, attentions: r.attentions, text, truncated: enc.truncated,
        fullLength: enc.fullLength, source: this.backend.kind };
    });
    this.result = out;
    if (out.truncated) {
      this.note(truncationText(text, out.fullLength, out.tokens.length));
    } else {
      this.note(`${out.tokens.length} tokens, recomputed ${this.where} in ${Math.round(this.timings.run_ms)} ms.`);
    }
    return out;
  }
}
