// view_translate.mjs -- the "translate" view: chapter 6's encoder-decoder on a source sentence the reader
// types in the toy language; greedy decoding step by step, each step's cross-attention over the source, the
// translation so far and the task's own translation.

import { runTranslate } from "./compute_toys.mjs";
import { checkArray, describeValue } from "./checks.mjs";
import { debounce, el, setText } from "./dom.mjs";
import { HeadGrid } from "./draw.mjs";
import { largestWeight } from "./layout.mjs";
import { TYPING_DELAY_MS, View } from "./view.mjs";
import { sentences, t } from "./i18n.mjs";

const PLAY_STEP_MS = 700; // a step of "Play the decoding"

/** A token id as chapter 6 writes it (mha_lib.live.translate.word_name). */
export function wordName(id, prefix, task) {
  if (id === task.bos) return "<bos>";
  if (id === task.eos) return "<eos>";
  return id === 0 ? "<pad>" : `${prefix}${id - 3}`;
}

/**
 * The reader's source sentence: words s0 .. s<N-1> (or their numbers), separated by spaces or commas.
 * @returns {number[]} the word numbers k
 * @throws {Error} naming the offending word: `word 2 is "s24", not one of s0 .. s23`
 */
export function parseSource(text, task) {
  const parts = String(text).split(/[\s,]+/).filter((p) => p !== "");
  if (parts.length < 1 || parts.length > task.max_words) {
    throw new Error(t("the sentence has {count} words; give 1 to {most}", { count: parts.length, most: task.max_words }));
  }
  return parts.map((p, i) => {
    const m = /^s?(\d+)$/i.exec(p);
    if (!m || Number(m[1]) >= task.num_words) {
      throw new Error(t("word {i} is {word}, not one of s0 .. s{last}", { i, word: describeValue(p), last: task.num_words - 1 }));
    }
    return Number(m[1]);
  });
}

/** "translate": the encoder-decoder on the reader's sentence, decoded greedily, step by step. */
export class TranslateView extends View {
  constructor(element, config, backend) {
    super(element, config, config.models.slice(), backend);
    this.task = config.task;
    this.dictionary = config.dictionary.slice();
    this.words = config.words.slice();
    this.firstActionText = t("Type a sentence in the toy language: the model translates it, one step at a time.");
    this.root.setAttribute("aria-label", t("Chapter 6's encoder-decoder translating a sentence you type, step by step"));
    this.attach([this.buildControls()], [this.buildMaps()]);
    this.requests = 0;
    this.show({ ...this.readingsOf(config), words: this.words, source: "config" });
  }

  readingsOf(config) {
    const keys = ["source_ids", "tokens", "confidence", "cross", "expected", "aligned"];
    return Object.fromEntries(keys.map((k) => [k, config[k]]));
  }

  get readoutHint() {
    return t("Point at a cell to read which source word a step looked at; click a map to enlarge it. On a touch " +
      "screen, tap a map to enlarge it, then tap a cell.");
  }

  buildControls() {
    const uid = Math.random().toString(36).slice(2);
    const { num_words: N, min_words: lo, max_words: hi } = this.task;
    this.box = el("textarea", { id: `mha-live-src-${uid}`, rows: "2", spellcheck: "false", autocomplete: "off",
      class: "mha-live-sequence-box" });
    this.box.value = this.words.map((k) => `s${k}`).join(" ");
    const typed = debounce(() => {
      let words;
      try {
        words = parseSource(this.box.value, this.task);
      } catch (err) {
        this.refuse(err);
        return;
      }
      this.run({ words }).catch(() => {});
    }, TYPING_DELAY_MS);
    this.box.addEventListener("input", () => {
      this.requests += 1;
      this.root.classList.add("mha-live-stale");
      this.ensureModels().catch(() => {});
      typed();
    });
    const fresh = el("button", { type: "button", class: "mha-live-button" }, t("New sentence"));
    fresh.addEventListener("click", () => {
      const n = lo + Math.floor(Math.random() * (hi - lo + 1));
      this.run({ words: Array.from({ length: n }, () => Math.floor(Math.random() * N)) }).catch(() => {});
    });
    this.slider = el("input", { type: "range", id: `mha-live-dec-${uid}`, min: "0", max: "0", step: "1", value: "0" });
    this.stepText = el("output", { for: this.slider.id });
    this.slider.addEventListener("input", () => {
      this.stopPlaying();
      this.step = Number(this.slider.value);
      this.draw();
    });
    this.play = el("button", { type: "button", class: "mha-live-button" }, t("Play the decoding"));
    this.play.addEventListener("click", () => this.playDecoding());
    return el("div", {},
      el("p", { class: "mha-live-note" }, t("Words s0 … s{last}, separated by spaces, 1 to {hi} of them (the model " +
        "was trained on {lo} to {hi}). The task's translation swaps each word for its dictionary word and " +
        "reverses the order.", { last: N - 1, lo, hi })),
      el("label", { for: this.box.id, class: "mha-live-label" }, t("Your sentence")), this.box,
      el("div", { class: "mha-live-controls" }, fresh, this.play),
      el("div", { class: "mha-live-controls" }, el("label", { for: this.slider.id }, t("Decoding")), this.slider,
        this.stepText));
  }

  buildMaps() {
    this.scores = el("p", { class: "mha-live-scores", "aria-live": "polite" });
    const captionId = `mha-live-strip-${Math.random().toString(36).slice(2)}`;
    this.strip = el("div", { class: "mha-live-strip mha-live-strip-wrap mha-live-strip-words", role: "list",
      "aria-labelledby": captionId });
    const caption = el("p", { class: "mha-live-strip-caption", id: captionId },
      t("Each step's output, with the correct word small above it: ✓ right, ✗ wrong; the steps after the one chosen are dim."));
    this.layers = el("div");
    this.grids = [];
    return el("div", {}, this.scores, caption, this.strip,
      el("p", { class: "mha-live-note" }, t("Cross-attention of each decoder head: a row per step taken (labelled, when " +
        "enlarged, by the word the step wrote; the chapter's figures label the same rows by the decoder's input, <bos> " +
        "and the words before), a column per source word and the source's <eos>. Counting from 0, the step that " +
        "writes word j of an n-word sentence translates source word n − 1 − j: the anti-diagonal. “aligned” on each " +
        "map is the head's mean weight on that word, over the steps that write a word.")),
      this.layers);
  }

  /** Draw a result; the slider goes to its last step. It becomes lastResult. */
  show(result) {
    this.result = { ...result, model: this.modelIds[0], attentions: result.cross }; // the tests' contract: attentions
    this.root.classList.remove("mha-live-stale");
    if (document.activeElement !== this.box) this.box.value = result.words.map((k) => `s${k}`).join(" ");
    this.slider.max = String(result.tokens.length - 1);
    this.step = result.tokens.length - 1;
    this.slider.value = String(this.step);
    this.draw();
  }

  draw() {
    const r = this.result;
    const s = this.step; // the step shown, from 0
    const T = r.tokens.length;
    const out = (id) => wordName(id, "t", this.task);
    const text = t("step {nth} of {count}", { nth: s + 1, count: T });
    this.slider.setAttribute("aria-valuetext", t("{step}: wrote {word}", { step: text, word: out(r.tokens[s]) }));
    setText(this.stepText, text);
    const right = r.tokens.filter((id, j) => id === r.expected[j]).length;
    const exact = T === r.expected.length && right === T;
    const words = { written: r.tokens.slice(0, s + 1).map(out).join(" "), nth: s + 1, right, count: r.expected.length,
      correct: r.expected.map(out).join(" ") };
    const written = s === T - 1 ? t("Written: {written}.", words) : t("Written after step {nth}: {written}.", words);
    setText(this.scores, sentences(written, exact
      ? t("The model's translation matches the correct one word for word (correct: {correct}).", words)
      : t("The model's translation has {right} of {count} tokens of the correct one (correct: {correct}).", words)));
    this.strip.replaceChildren(...Array.from({ length: Math.max(T, r.expected.length) }, (_, j) => {
      const got = j < T ? r.tokens[j] : null;
      const ok = got !== null && got === r.expected[j];
      const cell = el("span", { role: "listitem", class: got === null ? "" : ok ? "mha-live-right" : "mha-live-wrong" });
      if (j > s) cell.classList.add("mha-live-later");
      cell.append(el("small", {}, j < r.expected.length ? out(r.expected[j]) : "–"),
        el("span", {}, got === null ? "–" : `${out(got)}${ok ? "✓" : "✗"}`));
      const cellWords = { nth: j + 1, wrote: got === null ? "" : out(got), p: got === null ? "" : r.confidence[j].toFixed(2),
        task: j < r.expected.length ? out(r.expected[j]) : t("nothing") };
      cell.setAttribute("aria-label", got === null ? t("step {nth}: not taken (the task has {task})", cellWords)
        : ok ? t("step {nth}: wrote {wrote} (probability {p}), the task has {task}, right", cellWords)
          : t("step {nth}: wrote {wrote} (probability {p}), the task has {task}, wrong", cellWords));
      return cell;
    }));
    const rows = r.tokens.slice(0, s + 1).map(out);
    const keys = r.source_ids.map((id) => wordName(id, "s", this.task));
    const maps = r.cross.map((layer) => layer.map((map) => map.slice(0, s + 1)));
    const vmax = largestWeight(r.cross.flat());
    this.vmax = vmax;
    this.legend.show(vmax);
    const width = this.layers.clientWidth || 600;
    maps.forEach((layer, l) => {
      if (!this.grids[l]) {
        const grid = new HeadGrid({ readout: this.readout, minMap: 120 });
        const title = el("p", { class: "mha-live-layer-title" }, t("decoder layer {layer}: cross-attention", { layer: l }));
        grid.onEnlarge = (h) => {
          this.lastFocus = grid.buttons[h];
          this.enlarge(grid.heads[h], grid.tokens, grid.vmax, grid, h);
        };
        this.layers.append(title, grid.node);
        this.grids[l] = grid;
      }
      const heads = layer.map((map, h) => ({ key: `L${l}.H${h}`, label: `L${l}.H${h} · ${t("aligned {weight}", { weight: r.aligned[l][h].toFixed(2) })}`,
        map, off: false, keyTokens: keys }));
      this.grids[l].show(heads, rows, vmax, width);
    });
    if (!this.zoom.node.hidden && this.zoom.head) {
      for (const grid of this.grids) {
        const h = grid.heads.findIndex((x) => x.key === this.zoom.head.key);
        if (h >= 0) {
          grid.placeZoom(this.zoom.node, h);
          this.zoom.open(grid.heads[h], rows, vmax);
        }
      }
    }
  }

  redraw() {
    this.draw();
    this.zoom.draw();
  }

  stopPlaying() {
    clearInterval(this.playing);
    this.playing = null;
  }

  /** Move the slider from the first step to the last, one step every PLAY_STEP_MS. */
  playDecoding() {
    this.stopPlaying();
    this.step = 0;
    this.slider.value = "0";
    this.draw();
    this.playing = setInterval(() => {
      if (this.step >= this.result.tokens.length - 1) {
        this.stopPlaying();
        return;
      }
      this.step += 1;
      this.slider.value = String(this.step);
      this.draw();
    }, PLAY_STEP_MS);
  }

  /** The export (see View.exportFigure): every head's cross-attention up to the step shown; the readings in the JSON. */
  exportFigure() {
    const r = this.result;
    const heads = this.grids.flatMap((grid) => grid.heads.map((h) => ({ label: h.label, map: h.map, off: false,
      tokens: grid.tokens, keyTokens: h.keyTokens })));
    const out = (id) => wordName(id, "t", this.task);
    const title = [t("{model}: cross-attention of every decoder head, step {nth} of {count}",
      { model: r.model, nth: this.step + 1, count: r.tokens.length }),
    t("Source: {source}; output: {output}", { source: r.source_ids.map((id) => wordName(id, "s", this.task)).join(" "),
      output: r.tokens.slice(0, this.step + 1).map(out).join(" ") }),
    t("Rows are steps, columns source words; colour 0 to {vmax}.", { vmax: this.vmax.toFixed(2) })];
    return { name: [r.model, `step${this.step + 1}`], title, heads, vmax: this.vmax,
      data: { view: "translate", model: r.model, words: r.words, step: this.step, source: r.source,
        ...this.readingsOf(r) } };
  }

  /** run()'s input: {words: word numbers k (1 to max_words)}; throws, naming the value, on anything else. */
  checkInput(input) {
    if (!input || typeof input !== "object" || Array.isArray(input) || Object.keys(input).join() !== "words") {
      throw new Error(`run() takes {words: [word numbers]}, got ${describeValue(input)}`);
    }
    const { num_words: N, max_words: hi } = this.task;
    const fail = (what) => {
      throw new Error(`run({words}): ${what}`);
    };
    const word = (k, i) => (Number.isInteger(k) && k >= 0 && k < N ? k
      : fail(`words[${i}] = ${describeValue(k)} is not a word number in 0..${N - 1}`));
    const words = checkArray(input.words, { name: "words", what: "word numbers", item: word, fail });
    if (words.length < 1 || words.length > hi) fail(`words has ${words.length} words; give 1 to ${hi}`);
    return words;
  }

  /**
   * Translate `{words}` greedily. Resolves with the result of THIS input (drawn if no later one came meanwhile);
   * rejects, state kept, on bad input.
   */
  async run(input) {
    let words;
    try {
      words = this.checkInput(input);
    } catch (err) {
      throw this.refuse(err);
    }
    this.stopPlaying();
    this.requests += 1;
    const request = this.requests;
    let result;
    try {
      result = await this.compute(async (clock) => {
        const t0 = performance.now();
        const readings = await runTranslate(this.models[0], words, this.task, this.dictionary, clock);
        this.timings.infer_ms = performance.now() - t0;
        const out = { ...readings, words, source: this.backend.kind };
        if (request === this.requests) clock.time("draw", () => this.show(out));
        return { ...out, model: this.modelIds[0], attentions: out.cross };
      });
    } catch (err) {
      if (request === this.requests) this.root.classList.remove("mha-live-stale");
      throw err;
    }
    if (request === this.requests) {
      this.note(t("Translated {where} in {steps} steps, {ms} ms.",
        { where: this.where, steps: result.tokens.length, ms: Math.round(this.timings.run_ms) }));
    }
    return result;
  }
}
