// mha_live.mjs -- the book's live attention views: the page imports this module, which mounts them.
//
// One component, nine views, chosen by the element's data-view:
//   "sentence"    MiniLM (all-MiniLM-L6-v2) on a sentence the reader types (view_sentence.mjs);
//   "toy-compare" chapter 1's task read by the 1-, 2-, 4- and 8-head models side by side (view_toy_compare.mjs);
//   "prune"       MiniLM with a 6 x 12 grid of head toggles, embedding fidelity and paraphrase ranking
//                 against the unpruned model (view_prune.mjs);
//   "timing"      chapter 3's question on the reader's device: attention at equal FLOPs for H = 1 ... 64,
//                 timed in the browser beside the book's machine (view_timing.mjs);
//   "induction"   chapter 5's two-layer model at its training checkpoints on a token sequence the reader
//                 edits, heads switched off at will (view_induction.mjs);
//   "translate"   chapter 6's encoder-decoder on a sentence the reader types: greedy decoding step by step,
//                 each step's cross-attention (view_translate.mjs);
//   "digit"       chapter 7's Vision Transformers on an 8x8 digit the reader draws: probabilities, each
//                 head's [CLS] attention over the pixels, the rollout (view_digit.mjs);
//   "patterns"    chapter 9: a sparse pattern the reader picks (every key, a window with sinks, BigBird's
//                 blocks) on chapter 5's or 9's weights: the mask, the maps, the cache bytes (view_patterns.mjs).
//   "speed"       "How to use the interactive figures": every view above timed on the reader's device, beside
//                 the book's machine (view_speed.mjs, speed.mjs: the code benchmarks/bench_live.py runs).
//   "steps"       chapter 2: one head of one layer taken apart on the reader's sentence (MiniLM) or sequence
//                 (chapter 1's models): X, Q, K, V, Q·Kᵀ, ÷√d_k, mask, softmax, ·V, concat, W^O (view_steps.mjs).
//
// The element is written by mha_lib.live (Python) in a notebook cell:
//   <div class="mha-live-view" data-view="sentence" data-model="all-MiniLM-L6-v2"
//        data-config="{...html-escaped JSON...}"> <img class="mha-live-fallback" ...> </div>
// data-config holds the maps mha_lib computed when the notebook ran, so the view draws at once,
// without downloading anything; what it must hold is view_contract.json (checked by contract.mjs here
// and by mha_lib.live in Python).
//
// The modules, in the order mha_lib.live.widget_esm() joins them (each imports only earlier ones):
//   i18n_zh.mjs, i18n.mjs  the words in the page's language (English, or Chinese on a zh page) and their catalog
//   wordpiece.mjs        the tokenizer (ids equal to mha_lib.pretrained.WordPieceTokenizer)
//   checks.mjs           the one list check; run() inputs, head masks
//   contract.mjs         checkConfig: the view configuration against view_contract.json
//   layout.mjs           colour scale, grid and zoom layouts (pure)
//   figure.mjs           what a view exports: the figure's layout, its SVG, the CSV, file names (pure)
//   text.mjs             the texts shown (sizes, labels, the readout)
//   compute.mjs          feeds, running a model, reading its outputs, scores (either backend)
//   steps.mjs            one head's stages from a layer's steps file, the steps view's input and export (pure)
//   integrity.mjs        SHA-256 of fetched files
//   runtime_browser.mjs  backend: onnxruntime-web (in its Web Worker), files from ../models/ or the reader's disk
//   runtime_kernel.mjs   backend: the notebook's kernel (anywidget messages)
//   dom.mjs              elements and text, never HTML
//   draw.mjs             maps on canvas, the grid of heads, the enlarged head, the colour scale
//   styles.mjs           adds mha_live.css to the page
//   view.mjs             what every view shares, and the backend interface the views use
//   layer_maps.mjs       MiniLM's maps by layer (sentence and prune)
//   head_view.mjs        the sentence view's lines between tokens (BertViz's head view), one colour per head
//   head_toggles.mjs     the grid of head toggles (prune, induction)
//   view_sentence.mjs, view_toy_compare.mjs, view_prune.mjs, view_timing.mjs, view_induction.mjs, view_translate.mjs,
//   view_digit.mjs, view_patterns.mjs, view_steps.mjs, view_speed.mjs  the views
//   mha_live.mjs         mounting, and anywidget's render (this file)
//
// Contract for tests (issue 17): element.mhaLive = {view, model, models, backend, run(input) ->
// Promise, lastResult}; lastResult = {tokens, attentions, source} for `model` (toy-compare and digit: also
// models[id]; digit: attentions are [CLS]'s 8 x 8 pixel maps; translate: the cross-attention, tokens the
// output ids; timing: {heads, book_seconds, seconds} instead; patterns: also pattern, reach); source: "config" (the notebook's numbers),
// "browser" or "kernel".

import { checkConfig } from "./contract.mjs";
import { browserBackend } from "./runtime_browser.mjs";
import { kernelBackend } from "./runtime_kernel.mjs";
import { el, setText } from "./dom.mjs";
import { t } from "./i18n.mjs";
import { addStyle } from "./styles.mjs";
import { SentenceView } from "./view_sentence.mjs";
import { ToyCompareView } from "./view_toy_compare.mjs";
import { PruneView } from "./view_prune.mjs";
import { TimingView } from "./view_timing.mjs";
import { InductionView } from "./view_induction.mjs";
import { TranslateView } from "./view_translate.mjs";
import { DigitView } from "./view_digit.mjs";
import { PatternsView } from "./view_patterns.mjs";
import { StepsView } from "./view_steps.mjs";
import { SpeedView } from "./view_speed.mjs";

/** Each view's class, by the view's name: the names are view_contract.json's (test/views.test.mjs checks it). */
export const VIEWS = { sentence: SentenceView, "toy-compare": ToyCompareView, prune: PruneView, timing: TimingView,
  induction: InductionView, translate: TranslateView, digit: DigitView, patterns: PatternsView, steps: StepsView,
  speed: SpeedView };

/** @typedef {HTMLElement & {mhaLive?: object}} LiveElement  a .mha-live-view element; mhaLive: its view's api */

/**
 * Turn one .mha-live-view element into a live view (once). Returns element.mhaLive.
 * A bad data-config leaves the fallback figure in place, with a visible message.
 * @param {LiveElement} element
 * @param {{backend?: object}} [options]  backend: browserBackend (default) or kernelBackend(widget model)
 */
export function mount(element, { backend = browserBackend } = {}) {
  if (element.mhaLive) return element.mhaLive;
  addStyle();
  const view = element.dataset.view;
  try {
    const config = checkConfig(view, JSON.parse(element.dataset.config || "null"), element.dataset.model);
    // the speed view mounts the views it times (with the same backend)
    const instance = new VIEWS[view](element, config, backend, (node) => mount(node, { backend }));
    element.mhaLive = instance.api(view, instance.primary || instance.modelIds[0]);
  } catch (err) {
    const message = el("p", { class: "mha-live-status mha-live-error", role: "status" });
    setText(message, t("This live view could not start ({error}); the figure is the one computed when {when}.",
      { error: err.message, when: backend.madeWhen }));
    element.append(message);
    console.warn("mha_live:", err);
    element.mhaLive = { view, model: element.dataset.model, models: [], lastResult: null,
      run: () => Promise.reject(err), error: String(err.message) };
  }
  return element.mhaLive;
}

/** Mount every live view under `root` (the page). */
export function mountAll(root = document) {
  return Array.from(root.querySelectorAll(".mha-live-view"), (node) => mount(/** @type {LiveElement} */ (node)));
}

// In a kernel: anywidget's entry point (mha_lib.live.LiveWidget loads these modules, joined, as its _esm).

/**
 * Draw the view of an mha_lib.live.LiveWidget in `el` (anywidget calls this). The widget's traits:
 * live_view, live_model, live_config (the dict of mha_lib.live.live_view), live_fallback (a
 * data:image/png URL or ""), live_alt, live_caption. The maps are computed by the kernel.
 * @returns {() => void} cleanup: stops listening to the kernel's answers
 */
function render({ model, el: host }) {
  const element = el("div", { class: "mha-live-view", "data-view": model.get("live_view"),
    "data-model": model.get("live_model"), "data-config": JSON.stringify(model.get("live_config")) });
  const src = model.get("live_fallback");
  if (typeof src === "string" && src.startsWith("data:image/png;base64,")) {
    element.append(el("img", { class: "mha-live-fallback", src, alt: model.get("live_alt") || "",
      style: "max-width:100%;height:auto" }));
  }
  const caption = model.get("live_caption");
  if (caption) element.append(el("p", { class: "mha-live-caption" }, String(caption)));
  host.append(element);
  const backend = kernelBackend(model);
  mount(element, { backend });
  return () => backend.close();
}

export default { render };
