// mha_live.mjs -- the book's live attention views: the reader's browser runs the model.
//
// One component, three views, chosen by the element's data-view:
//   "sentence"    MiniLM (all-MiniLM-L6-v2) on a sentence the reader types: every head of a
//                 layer (or of all six layers), recomputed as they type;
//   "toy-compare" chapter 1's task read by the 1-, 2-, 4- and 8-head models side by side; the
//                 reader changes tokens and moves the mark, and sees maps and predictions;
//   "prune"       MiniLM with a 6 x 12 grid of head toggles (the model's head_mask input):
//                 embedding fidelity and paraphrase ranking against the unpruned model.
//
// The element is written by mha_lib.live (Python) in a notebook cell:
//   <div class="mha-live-view" data-view="sentence" data-model="all-MiniLM-L6-v2"
//        data-config="{...html-escaped JSON...}"> <img class="mha-live-fallback" ...> </div>
// data-config holds the maps mha_lib computed when the notebook ran, so the view draws at once,
// without downloading anything. The model (an ONNX file exported by mha_lib.export, listed with
// its size in ../models/manifest.json) is fetched at the reader's first action, and run by
// onnxruntime-web's WebAssembly backend (vendored in ../vendor/onnxruntime-web/), one thread.
//
// Data shapes (every map is a plain nested array):
//   attentions  [layer][head][query][key]  weights in [0, 1], each query's row sums to 1
//   tokens      [L] strings, the row and column labels
//   head mask   [layer][head]  1 = head on, 0 = off (its output is zeroed; its own weights are
//               still computed, and drawn grey)
//
// Two backends compute the maps (section 2): in the built book, onnxruntime-web in the page (the
// default); in Jupyter and Colab, the notebook's kernel: mha_lib.live.LiveWidget (an anywidget)
// loads this same file as its ES module, and render() (section 6) mounts the view with
// kernelBackend(model), whose session.run sends the feeds to the kernel, where mha_lib computes
// the outputs. The views read the same {name: {data, dims}} outputs either way; their texts say
// which one computes (in kernel mode the page fetches no file: no size, no runtime licence line).
//
// Contract for tests (issue 17): element.mhaLive = {view, model, models, backend, run(input) ->
// Promise, lastResult}; lastResult = {tokens, attentions, source} for `model` (toy-compare: also
// models[id]); source: "config" (the notebook's numbers), "browser" or "kernel".
//
// Safety: every text from the reader or the data reaches the page through textContent (setText)
// or canvas fillText, never innerHTML.

import { WordPieceTokenizer } from "./wordpiece.mjs";

const HERE = import.meta.url;
/** `path` relative to this module; null where the module has no folder (anywidget loads it from a blob: URL). */
function besideModule(path) {
  try {
    return new URL(path, HERE).href;
  } catch {
    return null;
  }
}
export const URLS = {
  ort: besideModule("../vendor/onnxruntime-web/ort.wasm.min.mjs"),
  ortDir: besideModule("../vendor/onnxruntime-web/"),
  wasm: besideModule("../vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm"),
  models: besideModule("../models/"),
};
const MINILM = "all-MiniLM-L6-v2";
const TYPING_DELAY_MS = 300; // debounce of the text box
const TOGGLE_DELAY_MS = 120; // debounce of head toggles and token edits

// =============================================================================================
// 1. Pure helpers (no DOM, no network): tested by mha_lib/web/test/mha_live.test.mjs
// =============================================================================================

/** matplotlib's viridis at 17 evenly spaced points (the book's static figures use viridis). */
export const VIRIDIS = [
  [68, 1, 84], [72, 24, 106], [71, 45, 123], [66, 64, 134], [59, 82, 139], [51, 99, 141],
  [44, 114, 142], [38, 130, 142], [33, 145, 140], [31, 160, 136], [40, 174, 128], [63, 188, 115],
  [94, 201, 98], [132, 212, 75], [173, 220, 48], [216, 226, 25], [253, 231, 37],
];

/**
 * Colour of a weight on the scale 0 .. vmax (viridis, linearly interpolated).
 * @param {number} value  the weight; clipped into [0, vmax]
 * @param {number} vmax   top of the scale (> 0)
 * @returns {number[]} [r, g, b], integers in 0..255
 */
export function colourOf(value, vmax) {
  const top = vmax > 0 ? vmax : 1;
  const t = Math.min(1, Math.max(0, (Number.isFinite(value) ? value : 0) / top)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(t));
  const f = t - i;
  return VIRIDIS[i].map((c, j) => Math.round(c + f * (VIRIDIS[i + 1][j] - c)));
}

/** The grey of a weight, for a head that is turned off (same lightness order as viridis). */
export function greyOf(value, vmax) {
  const [r, g, b] = colourOf(value, vmax);
  const y = Math.round(0.3 * r + 0.59 * g + 0.11 * b);
  return [y, y, y];
}

/** Largest weight over a list of maps ([query][key] arrays); 1 when there is none. */
export function largestWeight(maps) {
  let top = 0;
  for (const map of maps) for (const row of map) for (const w of row) if (w > top) top = w;
  return top > 0 ? top : 1;
}

/**
 * Grid layout of `count` square maps of L x L cells in a column `width` px wide.
 * Columns: as many as fit with maps of at least `minMap` px, then balanced so that rows are
 * full (12 heads in 5 possible columns -> 3 rows of 4). Cells are whole pixels when a cell is
 * 4 px or more (even cells); smaller cells are fractional (the map is scaled).
 * @returns {{columns:number, rows:number, map:number, cell:number}} map: side in CSS px
 */
export function gridLayout({ width, count, length, minMap = 110, maxMap = 220, gap = 8 }) {
  if (!(count >= 1) || !(length >= 1)) throw new Error(`gridLayout needs count >= 1 and length >= 1, got ${count}, ${length}`);
  const usable = Math.max(40, Math.floor(width));
  const fit = Math.max(1, Math.floor((usable + gap) / (minMap + gap)));
  const rows = Math.ceil(count / Math.min(count, fit));
  const columns = Math.ceil(count / rows);
  let map = Math.min(maxMap, Math.floor((usable - gap * (columns - 1)) / columns));
  let cell = map / length;
  if (cell >= 4) {
    cell = Math.floor(cell);
    map = cell * length;
  }
  return { columns, rows, map, cell };
}

/**
 * The last item of the grid row that holds item `index` (the enlarged map opens after it, under the clicked map).
 * @param {number} index   0-based item
 * @param {number} columns items per row (>= 1)
 * @param {number} count   items in the grid
 * @returns {number} index of the row's last item (the grid's last item for a short last row)
 */
export function rowEnd(index, columns, count) {
  if (!(columns >= 1) || !(index >= 0) || index >= count) {
    throw new Error(`rowEnd: item ${index} of ${count} in ${columns} columns`);
  }
  return Math.min(count - 1, (Math.floor(index / columns) + 1) * columns - 1);
}

/**
 * Layout of one enlarged map with token labels: label margins, cell size.
 * @param {number} width      available width (px)
 * @param {number} length     L
 * @param {number} labelWidth width of the longest label (px), measured by the caller
 * @returns {{cell:number, margin:number, size:number, labels:boolean}} size: full canvas side
 */
export function zoomLayout(width, length, labelWidth) {
  const side = Math.max(120, Math.min(Math.floor(width), 640));
  const margin = Math.min(Math.ceil(labelWidth) + 8, Math.floor(side * 0.3));
  const withLabels = (side - margin) / length;
  if (withLabels >= 9) {
    const cell = Math.min(32, Math.floor(withLabels));
    return { cell, margin, size: margin + cell * length, labels: true };
  }
  const cell = side / length;
  return { cell, margin: 0, size: side, labels: false };
}

/**
 * Per-layer, per-head maps of one batch row from onnxruntime's `attentions` output.
 * @param {Float32Array} data  (num_layers, B, H, Lmax, Lmax), row-major
 * @param {number[]} dims      [num_layers, B, H, Lmax, Lmax]
 * @param {number} row         batch row b
 * @param {number} n           real tokens of that row (<= Lmax): padding is cut off
 * @returns {number[][][][]}   [layer][head][query][key], each map n x n
 */
export function attentionsFromOutput(data, dims, row, n) {
  const [numLayers, B, H, L, S] = dims.map(Number);
  if (L !== S || row < 0 || row >= B || n > L || data.length !== numLayers * B * H * L * S) {
    throw new Error(`attentions of dims [${dims}] do not hold row ${row} with ${n} tokens`);
  }
  const out = [];
  for (let l = 0; l < numLayers; l++) {
    const heads = [];
    for (let h = 0; h < H; h++) {
      const base = ((l * B + row) * H + h) * L * L;
      const map = [];
      for (let q = 0; q < n; q++) map.push(Array.from(data.subarray(base + q * L, base + q * L + n)));
      heads.push(map);
    }
    out.push(heads);
  }
  return out;
}

/**
 * Chapter 1's labels (mha_lib.tasks.PrevMarkedTask): y_i = (x_{i-1} -/+ x_m) mod V for
 * i >= 1, where m is the marked position; position 0 has no label (null).
 * @param {number[]} ids    tokens x_0 .. x_{L-1}, in 0..V-1
 * @param {number[]} types  1 at the marked position, 0 elsewhere (exactly one 1)
 * @param {{vocab_size:number, op:string}} task
 * @returns {(number|null)[]}
 */
export function prevMarkedLabels(ids, types, task) {
  const m = types.indexOf(1);
  if (m < 0 || types.lastIndexOf(1) !== m) throw new Error("exactly one position must be marked");
  const V = task.vocab_size;
  const sign = task.op === "add" ? 1 : -1;
  return ids.map((_, i) => (i === 0 ? null : (((ids[i - 1] + sign * ids[m]) % V) + V) % V));
}

/** Token labels of a toy sequence, a star on the marked one (as mha_lib's task.tokens). */
export function markedTokens(ids, types) {
  return ids.map((t, i) => (types[i] === 1 ? "*" : "") + String(t));
}

/** Index of the largest value in each row of a (L, C) array given flat, and its softmax probability. */
export function argmaxRows(logits, L, C) {
  const predictions = [];
  const confidence = [];
  for (let i = 0; i < L; i++) {
    const row = logits.subarray(i * C, (i + 1) * C);
    let best = 0;
    for (let c = 1; c < C; c++) if (row[c] > row[best]) best = c;
    let sum = 0;
    for (let c = 0; c < C; c++) sum += Math.exp(row[c] - row[best]);
    predictions.push(best);
    confidence.push(1 / sum);
  }
  return { predictions, confidence };
}

/**
 * Fidelity and paraphrase ranking, as mha_lib.live.paraphrase_scores (chapter 4's evaluation).
 * Texts are anchors (A), then candidates: anchor i's paraphrase is text A + i.
 * @param {Float32Array} emb  (N, d) sentence embeddings, row-major
 * @param {Float32Array} ref  (N, d) the unpruned model's
 * @param {number} d
 * @param {number} A          number of anchors
 * @returns {{fidelity:number, mrr:number}} mean cosine to ref; mean 1 / rank of the paraphrase
 */
export function paraphraseScores(emb, ref, d, A) {
  const N = emb.length / d;
  if (!Number.isInteger(N) || ref.length !== emb.length || N < 2 * A || A < 1) {
    throw new Error(`paraphraseScores: ${emb.length} and ${ref.length} values, d=${d}, A=${A} do not fit`);
  }
  const dot = (x, i, y, j) => {
    let s = 0;
    for (let k = 0; k < d; k++) s += x[i * d + k] * y[j * d + k];
    return s;
  };
  let fidelity = 0;
  for (let i = 0; i < N; i++) fidelity += dot(emb, i, ref, i) / Math.sqrt(dot(emb, i, emb, i) * dot(ref, i, ref, i));
  let mrr = 0;
  for (let a = 0; a < A; a++) {
    const right = dot(emb, a, emb, A + a);
    let rank = 1;
    for (let c = A; c < N; c++) if (dot(emb, a, emb, c) > right) rank += 1;
    mrr += 1 / rank;
  }
  return { fidelity: fidelity / N, mrr: mrr / A };
}

/**
 * Refuse a backend's outputs holding NaN or ±Infinity, before anything is drawn from them (a damaged
 * weight would draw as dark cells and count as wrong predictions).
 * @param {string} modelId
 * @param {Object<string, {data, dims}>} outputs  session.run's outputs; float arrays are checked
 * @throws {Error} `the model ch1-h2 computed non-finite attentions: 2048 of 2048 values (2048 NaN), the first at index 0`
 */
export function checkFinite(modelId, outputs) {
  for (const [name, tensor] of Object.entries(outputs)) {
    const data = tensor && tensor.data;
    if (!(data instanceof Float32Array || data instanceof Float64Array)) continue;
    let bad = 0;
    let nan = 0;
    let first = -1;
    for (let i = 0; i < data.length; i++) {
      if (Number.isFinite(data[i])) continue;
      if (first < 0) first = i;
      bad += 1;
      if (Number.isNaN(data[i])) nan += 1;
    }
    if (bad) {
      const kinds = [nan ? `${nan} NaN` : "", bad > nan ? `${bad - nan} ±Infinity` : ""].filter((x) => x).join(", ");
      throw new Error(`the model ${modelId} computed non-finite ${name}: ${bad} of ${data.length} values (${kinds}), ` +
        `the first at index ${first}`);
    }
  }
  return outputs;
}

// SHA-256 (FIPS 180-4): the round constants, and the first hash value.
const SHA256_K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const SHA256_H0 = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
const rotr = (x, n) => (x >>> n) | (x << (32 - n));

/**
 * SHA-256 of `bytes` in plain JavaScript, as lowercase hex: for pages without crypto.subtle (an
 * http origin that is not localhost is no "secure context"). About 100 MB/s: a row file or the vocabulary in milliseconds.
 */
export function sha256Hex(bytes) {
  const n = bytes.length;
  const total = Math.ceil((n + 9) / 64) * 64; // the message, 0x80, zeros, its length in bits (64-bit big-endian)
  const padded = new Uint8Array(total);
  padded.set(bytes);
  padded[n] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(total - 8, Math.floor(n / 0x20000000));
  view.setUint32(total - 4, (n * 8) >>> 0);
  const hash = new Uint32Array(SHA256_H0);
  const w = new Uint32Array(64);
  for (let at = 0; at < total; at += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(at + 4 * i);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    let [a, b, c, d, e, f, g, h] = hash;
    for (let i = 0; i < 64; i++) {
      const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + SHA256_K[i] + w[i]) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      [h, g, f, e, d, c, b, a] = [g, f, e, (d + t1) | 0, c, b, a, (t1 + t2) | 0];
    }
    [a, b, c, d, e, f, g, h].forEach((x, i) => { hash[i] += x; });
  }
  return Array.from(hash, (x) => x.toString(16).padStart(8, "0")).join("");
}

/** SHA-256 of `bytes` as hex: the browser's crypto.subtle where the page has it, else sha256Hex. */
export async function sha256Of(bytes, subtle = globalThis.crypto && globalThis.crypto.subtle) {
  if (!subtle || typeof subtle.digest !== "function") return sha256Hex(bytes);
  const digest = new Uint8Array(await subtle.digest("SHA-256", bytes));
  return Array.from(digest, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * Refuse a fetched file whose SHA-256 is not the one the build wrote into the manifest (a file of the
 * right size can still be the wrong one: another row file, a vocabulary shifted by a line).
 * @param {string} name  the file, as the message names it
 * @throws {Error} `all-MiniLM-L6-v2.rows/0003.bin is not the file the book was built with (SHA-256 1f2e… , expected 9a8b…)`
 */
export async function checkDigest(name, bytes, expected) {
  if (typeof expected !== "string" || !/^[0-9a-f]{64}$/.test(expected)) {
    throw new Error(`models/manifest.json gives no SHA-256 for ${name} (got ${describeValue(expected)})`);
  }
  const got = await sha256Of(bytes);
  if (got !== expected) {
    throw new Error(`${name} is not the file the book was built with (its SHA-256 is ${got.slice(0, 12)}…, ` +
      `the manifest's ${expected.slice(0, 12)}…)`);
  }
  return bytes;
}

/** Bytes as megabytes for people: "22.4 MB" (one decimal), "0.3 MB". */
export function formatMB(bytes) {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

const NUMBER_WORDS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];

/**
 * What the first action downloads, in words: "the model (22.4 MB) and the runtime (14.2 MB)",
 * "the four models (0.9 MB)"; models or runtime already loaded by another view are left out.
 * @param {number} models        how many model files are still to download (0 when all are loaded)
 * @param {number} modelBytes    their total size in bytes
 * @param {number|null} runtime  bytes of the runtime still to download; 0 or null when loaded or unknown
 * @returns {string} "" when nothing is left to download
 */
export function downloadText(models, modelBytes, runtime) {
  const parts = [];
  if (models === 1) parts.push(`the model (${formatMB(modelBytes)})`);
  else if (models > 1) parts.push(`the ${NUMBER_WORDS[models] || models} models (${formatMB(modelBytes)})`);
  if (runtime) parts.push(`the runtime (${formatMB(runtime)})`);
  return parts.join(" and ");
}

/** A token as a short label: long tokens are cut with "…" (the readout shows them whole). */
export function shortLabel(token, max = 12) {
  const chars = Array.from(String(token));
  return chars.length <= max ? chars.join("") : chars.slice(0, max - 1).join("") + "…";
}

/** The only way text reaches the page: as text, never parsed as HTML. */
export function setText(node, text) {
  node.textContent = String(text);
  return node;
}

/** The readout of one cell: which head, which query and key token, the weight. */
export function readoutText(label, tokens, query, key, weight) {
  return `${label}: query “${tokens[query]}” (position ${query}) → key “${tokens[key]}” (position ${key}): ` +
    `weight ${weight.toFixed(3)}`;
}

/** `fn` called `ms` after the last of a burst of calls (with that call's arguments). */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** Check the configuration of a view: the fields its drawing needs, with the right shapes. */
export function checkConfig(view, config) {
  const fail = (what) => {
    throw new Error(`data-config of a "${view}" view: ${what}`);
  };
  if (!config || typeof config !== "object") fail("not a JSON object");
  const checkMaps = (attentions, n, where) => {
    if (!isList(attentions) || attentions.length === 0) fail(`${where} must be [layer][head][query][key]`);
    for (const layer of attentions) {
      if (!isList(layer) || layer.length === 0) fail(`${where}: a layer without heads`);
      for (const map of layer) {
        if (!isList(map) || map.length !== n || map.some((row) => !isList(row) || row.length !== n)) {
          fail(`${where}: every map must be ${n} x ${n} (one row and column per token)`);
        }
      }
    }
  };
  if (view === "sentence" || view === "prune") {
    if (!isList(config.tokens) || config.tokens.length < 1) fail("tokens must be a non-empty list");
    checkMaps(config.attentions, config.tokens.length, "attentions");
  }
  if (view === "prune") {
    const A = config.num_anchors;
    if (!isList(config.texts) || !Number.isInteger(A) || A < 1 || config.texts.length < 2 * A) {
      fail("texts must hold num_anchors anchors, their paraphrases and any other candidates");
    }
    try {
      checkHeadMask(config.mask, config.attentions.length, config.attentions[0].length);
    } catch (err) {
      fail(err.message);
    }
    for (const key of ["fidelity", "mrr", "mrr_all"]) if (typeof config[key] !== "number") fail(`${key} must be a number`);
  }
  if (view === "toy-compare") {
    if (!isList(config.models) || config.models.length === 0) fail("models must be a non-empty list");
    const task = config.task || {};
    if (!Number.isInteger(task.vocab_size) || !["sub", "add"].includes(task.op)) fail("task must give vocab_size and op");
    if (!isList(config.ids) || !isList(config.types) || config.ids.length !== config.types.length) {
      fail("ids and types must be lists of one length");
    }
    for (const id of config.models) {
      const r = config.results && config.results[id];
      if (!r) fail(`no results for ${id}`);
      checkMaps(r.attentions, config.ids.length, `results.${id}.attentions`);
    }
  }
  if (!["sentence", "prune", "toy-compare"].includes(view)) fail(`unknown view "${view}"`);
  return config;
}

/** A value as the error messages quote it: strings in quotes, NaN, null, arrays and objects by kind. */
export function describeValue(v) {
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v);
  if (Array.isArray(v)) {
    const flaw = arrayFlaw(v);
    return flaw ? `${flaw.includes("hole") ? "a sparse array" : "an array"} of ${v.length} (${flaw})`
      : `an array of ${v.length}`;
  }
  if (v === null) return "null";
  if (typeof v === "object") return "an object";
  return String(v); // numbers (NaN, Infinity included), booleans, undefined
}

/**
 * What keeps an Array from being a plain list: holes (`new Array(6)`, `[1, , 2]`) or own
 * properties besides its indices and length (`a.foo = 1`). null for a plain list.
 * @returns {string|null} "holes at 0, 1, 2, …" or `the extra property "foo"`
 */
export function arrayFlaw(list) {
  const holes = [];
  for (let i = 0; i < list.length && holes.length < 4; i++) if (!Object.hasOwn(list, i)) holes.push(i);
  if (holes.length) return `${holes.length > 1 ? "holes" : "a hole"} at ${holes.slice(0, 3).join(", ")}${holes.length > 3 ? ", …" : ""}`;
  const extra = Reflect.ownKeys(list).filter((k) => k !== "length" && !(typeof k === "string" && /^(0|[1-9]\d*)$/.test(k)));
  return extra.length ? `the extra property ${typeof extra[0] === "string" ? JSON.stringify(extra[0]) : String(extra[0])}` : null;
}

/**
 * The one check of every list the views take (run() input, masks, configurations): `value` must be
 * a plain Array -- no holes, no other properties -- of `length` items (any number when null), each
 * passed through `item(v, i)`, which returns the value to keep or calls `fail`.
 * @param {*} value
 * @param {{name: string, length?: number|null, what?: string, item?: Function, fail?: Function}} spec
 *   name: how messages call it ("ids", "mask[2]"); what: its items ("tokens", "0/1 values")
 * @returns {Array} a copy (the caller may change its array afterwards)
 * @throws {Error} via `fail`, naming the value: `ids must be a list of 16 tokens, got a sparse array of 16 (holes at 0, 1, 2, …)`
 */
export function checkArray(value, { name, length = null, what = "values", item = (v) => v, fail = throwError }) {
  if (!isList(value)) {
    return fail(`${name} must be a list of ${length === null ? "" : `${length} `}${what}, got ${describeValue(value)}`);
  }
  if (length !== null && value.length !== length) return fail(`${name} has ${value.length} ${what}, expected ${length}`);
  const copy = new Array(value.length);
  for (let i = 0; i < value.length; i++) copy[i] = item(value[i], i);
  return copy;
}

/** Is `value` a plain list: an Array without holes or other properties (what checkArray accepts)? */
export function isList(value) {
  return Array.isArray(value) && !arrayFlaw(value);
}

function throwError(message) {
  throw new Error(message);
}

/**
 * Check a toy view's input {ids, types} against the models' sequence length and vocabulary.
 * @param {*} input          what run() was given
 * @param {number} length    L, the sequence length of the view (every model reads L tokens)
 * @param {number} vocabSize V: tokens are integers in 0..V-1
 * @returns {{ids:number[], types:number[]}} copies, safe to keep
 * @throws {Error} naming the offending value: "ids[3] = 9 is out of 0..7", "2 marked positions (3, 5)"
 */
export function checkToyInput(input, length, vocabSize) {
  const fail = (what) => {
    throw new Error(`run({ids, types}): ${what}`);
  };
  if (!input || typeof input !== "object" || Array.isArray(input)) fail(`takes an object {ids, types}, got ${describeValue(input)}`);
  const token = (t, i) => {
    if (!Number.isInteger(t)) fail(`ids[${i}] = ${describeValue(t)} is not an integer token in 0..${vocabSize - 1}`);
    if (t < 0 || t >= vocabSize) fail(`ids[${i}] = ${t} is out of 0..${vocabSize - 1}`);
    return t;
  };
  const mark = (t, i) => (t === 0 || t === 1 ? t : fail(`types[${i}] = ${describeValue(t)} is not 0 or 1`));
  const ids = checkArray(input.ids, { name: "ids", length, what: "tokens", item: token, fail });
  const types = checkArray(input.types, { name: "types", length, what: "0/1 values", item: mark, fail });
  const marked = types.flatMap((t, i) => (t === 1 ? [i] : []));
  if (marked.length !== 1) {
    fail(marked.length === 0 ? "no marked position (types has no 1); exactly one is needed"
      : `${marked.length} marked positions (${marked.join(", ")}); exactly one is needed`);
  }
  return { ids, types };
}

/**
 * Check a head mask: numLayers rows of numHeads values, each 0 or 1 (numbers) or a boolean.
 * @returns {number[][]} [layer][head] of 0/1, a copy
 * @throws {Error} naming the offending value: `mask[2][5] = "0" is not 0/1 ...`, "mask has 5 rows, expected 6"
 */
export function checkHeadMask(mask, numLayers, numHeads) {
  const fail = (what) => {
    throw new Error(`mask must be ${numLayers} x ${numHeads} of 0/1 (numbers or booleans): ${what}`);
  };
  const value = (v, l, h) => (v === 0 || v === 1 || typeof v === "boolean" ? (v ? 1 : 0)
    : fail(`mask[${l}][${h}] = ${describeValue(v)} is not 0/1`));
  const row = (r, l) => checkArray(r, { name: `mask[${l}]`, length: numHeads, item: (v, h) => value(v, l, h), fail });
  return checkArray(mask, { name: "mask", length: numLayers, what: "rows", item: row, fail });
}

/** Licence wording of the files the site ships, by licence file (the manifest's `license`). */
export const LICENCE_NAMES = {
  "all-MiniLM-L6-v2.LICENSE.txt": "Apache-2.0, converted to ONNX, float16 weights",
  "mha_lib.LICENSE.txt": "trained for this book",
};

/**
 * The parts of the "what runs here" line: one entry per licence file of the view's models, and the runtime.
 * @param {string[]} modelIds
 * @param {object|null} manifest  models/manifest.json, or null when it could not be read (no links then)
 * @returns {{label:string, detail:string, href:string|null}[]}  href relative to the models folder / absolute
 */
export function licenceParts(modelIds, manifest) {
  const groups = new Map(); // licence file (or "?" without a manifest) -> model ids
  for (const id of modelIds) {
    const info = manifest && manifest.models ? manifest.models[id] : null;
    const key = info && typeof info.license === "string" ? info.license : "?";
    if (!groups.has(key)) groups.set(key, { ids: [], info });
    groups.get(key).ids.push(id);
  }
  const parts = [];
  for (const [file, { ids, info }] of groups) {
    const name = (info && typeof info.license_name === "string" && info.license_name) || LICENCE_NAMES[file] || "";
    parts.push({ label: `${ids.length > 1 ? "Models" : "Model"}: ${ids.join(", ")}`, detail: name,
      href: file === "?" ? null : new URL(file, URLS.models).href });
  }
  parts.push({ label: "Runtime: onnxruntime-web", detail: "MIT", href: new URL("LICENSE", URLS.ortDir).href });
  return parts;
}

// =============================================================================================
// 2. The runtime: onnxruntime-web, the model files, running them
// =============================================================================================

// The smallest WebAssembly module that uses a SIMD instruction (wasm-feature-detect's probe).
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0,
  65, 0, 253, 15, 253, 98, 11]);

/** Can this browser run onnxruntime-web's WebAssembly backend (WebAssembly with SIMD)? */
export function supportsWasmSimd() {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

/** GET `url` and report progress; the browser's HTTP cache keeps the file (a plain GET). */
async function fetchBytes(url, onBytes) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${url}`);
  if (!response.body || !response.body.getReader) {
    const buffer = new Uint8Array(await response.arrayBuffer());
    onBytes(buffer.length);
    return buffer;
  }
  const reader = response.body.getReader();
  const chunks = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.length;
    onBytes(received);
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return bytes;
}

let manifestPromise = null;
/**
 * ../models/manifest.json: {models: {id: {file, bytes, kind, num_layers, num_heads, inputs, outputs, vocab,
 * vocab_sha256, token_rows: {dir, rows, dim, rows_per_file, file_bytes, file_sha256: [one per file]}, license}}}.
 * Fetched once; a failed fetch is forgotten, so the next action (or "Try again") asks again.
 */
export function getManifest() {
  if (!manifestPromise) {
    const promise = fetch(URLS.models + "manifest.json").then((r) => {
      if (!r.ok) throw new Error(`HTTP ${r.status} for ${URLS.models}manifest.json`);
      return r.json();
    });
    promise.catch(() => {
      if (manifestPromise === promise) manifestPromise = null;
    });
    manifestPromise = promise;
  }
  return manifestPromise;
}

let runtimeBytes = null; // size of the WebAssembly runtime, from a HEAD request
/** Size in bytes of the WebAssembly file (a HEAD request: nothing downloaded), or null. */
export async function getRuntimeBytes() {
  if (runtimeBytes === null) {
    runtimeBytes = fetch(URLS.wasm, { method: "HEAD" })
      .then((r) => (r.ok ? Number(r.headers.get("content-length")) || 0 : 0))
      .catch(() => 0);
  }
  return runtimeBytes;
}

const loaded = new Set(); // "runtime" and model ids, once loaded: shared by every view of the page
const loadListeners = new Set(); // called when something is loaded (views re-say what is left to download)
function markLoaded(what) {
  loaded.add(what);
  for (const listener of loadListeners) listener(what);
}

let ortPromise = null;
/** Import onnxruntime-web once, WebAssembly backend, one thread; `onBytes` follows the .wasm download. */
function loadRuntime(onBytes) {
  if (!ortPromise) {
    ortPromise = (async () => {
      if (!supportsWasmSimd()) throw new Error("this browser cannot run WebAssembly with SIMD");
      const [ort, wasm] = await Promise.all([import(URLS.ort), fetchBytes(URLS.wasm, onBytes)]);
      ort.env.wasm.numThreads = 1; // static hosts send no cross-origin isolation: one thread for everyone
      ort.env.wasm.wasmPaths = URLS.ortDir; // the loader module ort-wasm-simd-threaded.mjs
      ort.env.wasm.wasmBinary = wasm.buffer; // fetched above, with progress
      markLoaded("runtime");
      return ort;
    })();
    ortPromise.catch(() => {
      ortPromise = null; // let a later action try again
    });
  }
  return ortPromise;
}

/** The vocabulary of a model (vocab.txt), checked against the manifest's vocab_sha256 before use. */
async function fetchVocab(info) {
  const response = await fetch(URLS.models + info.vocab);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${info.vocab}`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  await checkDigest(info.vocab, bytes, info.vocab_sha256);
  return new TextDecoder("utf-8").decode(bytes);
}

const modelPromises = new Map(); // model id -> Promise<Model>, shared by every view of the page

/**
 * Load one model: the runtime, the .onnx file and, for MiniLM, its vocabulary.
 * @param {string} id
 * @param {(what: string, bytes: number) => void} onBytes  progress, per file
 * @returns {Promise<{id, info, session, ort, tokenizer}>}
 */
export function loadModel(id, onBytes) {
  if (!modelPromises.has(id)) {
    const promise = (async () => {
      const manifest = await getManifest();
      const info = manifest.models && manifest.models[id];
      if (!info) throw new Error(`the site has no model "${id}" (models/manifest.json)`);
      const [ort, bytes, vocab] = await Promise.all([
        loadRuntime((n) => onBytes("runtime", n)),
        fetchBytes(URLS.models + info.file, (n) => onBytes(id, n)),
        info.vocab ? fetchVocab(info) : null,
      ]);
      const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
      const tokenizer = vocab === null ? null : WordPieceTokenizer.fromVocabText(vocab, { maxLength: info.max_length || 256 });
      markLoaded(id);
      return { id, info, session, ort, tokenizer, queue: Promise.resolve() };
    })();
    promise.catch(() => modelPromises.delete(id));
    modelPromises.set(id, promise);
  }
  return modelPromises.get(id);
}

/**
 * Run `task` (async) after every earlier task of the model, in call order: onnxruntime-web runs one
 * session call at a time, and a run that must first fetch word vectors may not be overtaken by a
 * later one that needs none (the maps of an older text would land last).
 */
function queued(model, task) {
  const next = model.queue.then(task);
  model.queue = next.catch(() => {});
  return next;
}

/** Run a session, one call at a time per model. */
function runSession(model, feeds) {
  return queued(model, () => model.session.run(feeds));
}

/** The head_mask input, (num_layers, H) float32, from [layer][head] 0/1. */
function headMaskTensor(model, mask) {
  const { num_layers: NL, num_heads: H } = model.info;
  const data = new Float32Array(NL * H).fill(1);
  if (mask) mask.forEach((row, l) => row.forEach((on, h) => { data[l * H + h] = on ? 1 : 0; }));
  return new model.ort.Tensor("float32", data, [NL, H]);
}

/**
 * A split model (mha_lib.export.split_for_web) keeps its token-embedding table in row files of
 * `rows_per_file` float16 rows (manifest: info.token_rows). Fetch, once each, the files holding the
 * rows of `ids` (and row 0, the padding id), into model.rowFiles: file number -> Uint16Array.
 * runBert calls it inside the model's queue, so two calls never fetch the same file at once.
 */
export async function fetchTokenRows(model, ids, onFetch = () => {}) {
  const spec = model.info.token_rows;
  if (!spec) return;
  model.rowFiles = model.rowFiles || new Map();
  const missing = rowFilesFor(spec, ids.flat()).filter((k) => !model.rowFiles.has(k));
  if (missing.length) onFetch(missing.length, missing.length * spec.file_bytes);
  await Promise.all(missing.map(async (k) => {
    const name = `${spec.dir}${String(k).padStart(4, "0")}.bin`;
    const rows = Math.min(spec.rows_per_file, spec.rows - k * spec.rows_per_file);
    if (!(k >= 0 && rows > 0)) throw new Error(`token id ${k * spec.rows_per_file} is outside the model's ${spec.rows} rows`);
    const bytes = await fetchBytes(URLS.models + name, () => {});
    if (bytes.byteLength !== rows * spec.dim * 2) {
      throw new Error(`${name} holds ${bytes.byteLength} bytes, not ${rows * spec.dim * 2}`);
    }
    await checkDigest(name, bytes, (spec.file_sha256 || [])[k]);
    model.rowFiles.set(k, new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2));
  }));
}

/** The numbers of the row files holding `ids` (and row 0, the padding id), ascending. */
export function rowFilesFor(spec, ids) {
  const files = new Set([0]);
  for (const id of ids) files.add(Math.floor(Number(id) / spec.rows_per_file));
  return [...files].sort((a, b) => a - b);
}

/** token_rows (U, dim) float16 and token_index (B, L) for a (B * L) id array, rows from fetchTokenRows. */
export function tokenRowFeeds(spec, rowFiles, ids, B, L, Tensor) {
  const where = new Map(); // id -> its row in token_rows
  const index = new BigInt64Array(B * L);
  ids.forEach((id, i) => {
    const n = Number(id);
    if (!where.has(n)) where.set(n, where.size);
    index[i] = BigInt(where.get(n));
  });
  const rows = new Uint16Array(where.size * spec.dim);
  for (const [id, u] of where) {
    const file = rowFiles.get(Math.floor(id / spec.rows_per_file));
    if (!file) throw new Error(`the word vectors of token id ${id} were not fetched`);
    const at = (id % spec.rows_per_file) * spec.dim;
    rows.set(file.subarray(at, at + spec.dim), u * spec.dim);
  }
  return {
    token_rows: new Tensor("float16", rows, [where.size, spec.dim]),
    token_index: new Tensor("int64", index, [B, L]),
  };
}

/** The feeds the model's file asks for (its inputs), from (B, L) token rows. */
function feedsFor(model, rows, types, mask) {
  const B = rows.length;
  const L = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(B * L);
  const typeIds = new BigInt64Array(B * L);
  const padding = new Uint8Array(B * L).fill(1); // bool, true = padding (mha_lib's convention)
  rows.forEach((row, b) => row.forEach((id, i) => {
    ids[b * L + i] = BigInt(id);
    typeIds[b * L + i] = BigInt(types ? types[b][i] : 0);
    padding[b * L + i] = 0;
  }));
  const { Tensor } = model.ort;
  const all = {
    input_ids: new Tensor("int64", ids, [B, L]),
    token_type_ids: new Tensor("int64", typeIds, [B, L]),
    key_padding_mask: new Tensor("bool", padding, [B, L]),
    head_mask: headMaskTensor(model, mask),
  };
  if (model.info.token_rows && model.session.inputNames.includes("token_rows")) {
    Object.assign(all, tokenRowFeeds(model.info.token_rows, model.rowFiles || new Map(), ids, B, L, Tensor));
  }
  const feeds = {};
  for (const name of model.session.inputNames) {
    if (!(name in all)) throw new Error(`the model ${model.id} asks for an input "${name}" the page does not know`);
    feeds[name] = all[name];
  }
  return feeds;
}

/**
 * MiniLM on texts: tokens, maps of text 0, sentence embeddings of all.
 * @returns {{encodings, attentions: [layer][head][q][k] of text 0, embeddings: Float32Array (N, d), d}}
 */
export async function runBert(model, texts, mask, onFetch) {
  const encodings = texts.map((t) => model.tokenizer.encode(t));
  const ids = encodings.map((e) => e.ids);
  const out = await queued(model, async () => {
    await fetchTokenRows(model, ids, onFetch); // a split model: the rows of these tokens, in the queue
    return checkFinite(model.id, await model.session.run(feedsFor(model, ids, null, mask)));
  });
  const att = out.attentions;
  const emb = out.sentence_embedding;
  return {
    encodings,
    attentions: attentionsFromOutput(att.data, att.dims, 0, encodings[0].ids.length),
    embeddings: emb ? emb.data : null,
    d: emb ? Number(emb.dims[1]) : 0,
  };
}

/** A toy TokenClassifier on one sequence: maps, predictions per position. */
export async function runToy(model, ids, types) {
  const out = checkFinite(model.id, await runSession(model, feedsFor(model, [ids], [types], null)));
  const [, L, C] = out.logits.dims.map(Number);
  return {
    attentions: attentionsFromOutput(out.attentions.data, out.attentions.dims, 0, ids.length),
    ...argmaxRows(out.logits.data, L, C),
  };
}

/** The default backend: onnxruntime-web in the reader's browser, files from the site. */
export const browserBackend = { kind: "browser", loadModel };

/** A tensor of the kernel backend: what onnxruntime-web's Tensor holds, as feedsFor builds it. */
export class KernelTensor {
  constructor(type, data, dims) {
    this.type = type;
    this.data = data;
    this.dims = dims;
  }
}

/** Bytes of one binary buffer of a widget message (ipywidgets gives DataViews; tests may give ArrayBuffers). */
function bufferBytes(buffer) {
  if (buffer instanceof ArrayBuffer) return new Uint8Array(buffer);
  if (ArrayBuffer.isView(buffer)) return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  throw new Error(`the kernel sent a buffer of an unknown kind (${describeValue(buffer)})`);
}

/** float32 values of a buffer, little-endian (numpy's "<f4"), copied so that they are aligned. */
function floatsOf(buffer) {
  const bytes = bufferBytes(buffer);
  if (bytes.byteLength % 4) throw new Error(`the kernel sent ${bytes.byteLength} bytes, not whole float32 values`);
  const out = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

/**
 * The kernel backend: a model whose session runs in the notebook's kernel (mha_lib.live.LiveWidget).
 * `widget` is anywidget's model object: {get, set, on, off, send, save_changes}. Messages (content of
 * model.send, answered by a "msg:custom" message with the same `request`):
 *   {op: "load", request, model}  ->  {op: "loaded", request, info: {kind, num_layers, num_heads,
 *                                      max_length, inputs, outputs}, vocab: vocab.txt text or null}
 *   {op: "run", request, model, feeds: {name: {type, dims, data: plain array}}}
 *                                 ->  {op: "result", request, outputs: {name: {dims, buffer: i}}} and
 *                                      buffers[i] holding float32 values (little-endian)
 *   any failure                   ->  {op: "error", request, message}: the promise rejects with it
 * @returns {{kind: "kernel", loadModel(id, onBytes) -> Promise<Model>, close()}}
 */
export function kernelBackend(widget) {
  const pending = new Map(); // request -> {resolve, reject}
  const prefix = Math.random().toString(36).slice(2);
  let count = 0;
  const onMessage = (msg, buffers) => {
    if (!msg || typeof msg !== "object" || !pending.has(msg.request)) return; // another view's answer
    const { resolve, reject } = pending.get(msg.request);
    pending.delete(msg.request);
    if (msg.op === "error") reject(new Error(String(msg.message)));
    else resolve({ msg, buffers: buffers || [] });
  };
  widget.on("msg:custom", onMessage);
  const ask = (content) => new Promise((resolve, reject) => {
    count += 1;
    const request = `${prefix}-${count}`;
    pending.set(request, { resolve, reject });
    try {
      widget.send({ ...content, request });
    } catch (err) {
      pending.delete(request);
      reject(err);
    }
  });
  const models = new Map(); // one load per model id and view
  const loadFromKernel = async (id) => {
    const { msg } = await ask({ op: "load", model: id });
    const info = msg.info;
    const session = {
      inputNames: info.inputs.slice(),
      outputNames: info.outputs.slice(),
      async run(feeds) {
        const plain = {};
        for (const [name, t] of Object.entries(feeds)) {
          plain[name] = { type: t.type, dims: t.dims.map(Number), data: Array.from(t.data, Number) };
        }
        const { msg: answer, buffers } = await ask({ op: "run", model: id, feeds: plain });
        const outputs = {};
        for (const [name, o] of Object.entries(answer.outputs)) {
          const data = floatsOf(buffers[o.buffer]);
          const size = o.dims.reduce((a, b) => a * b, 1);
          if (data.length !== size) throw new Error(`the kernel's ${name} has ${data.length} values, dims [${o.dims}]`);
          outputs[name] = { data, dims: o.dims };
        }
        return outputs;
      },
    };
    const tokenizer = typeof msg.vocab === "string"
      ? WordPieceTokenizer.fromVocabText(msg.vocab, { maxLength: info.max_length || 256 }) : null;
    return { id, info, session, ort: { Tensor: KernelTensor }, tokenizer, queue: Promise.resolve() };
  };
  return {
    kind: "kernel",
    loadModel(id) {
      if (!models.has(id)) {
        const promise = loadFromKernel(id);
        promise.catch(() => models.delete(id)); // "Try again" asks the kernel again
        models.set(id, promise);
      }
      return models.get(id);
    },
    close() {
      widget.off("msg:custom", onMessage);
      for (const { reject } of pending.values()) reject(new Error("the view was closed"));
      pending.clear();
    },
  };
}

// =============================================================================================
// 3. Drawing: maps on canvas, the grid of heads, the enlarged head
// =============================================================================================

/** A new element, with attributes (values as strings) and text children (as text). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined && v !== false) node.setAttribute(k, String(v));
  for (const child of children) node.append(typeof child === "string" ? document.createTextNode(child) : child);
  return node;
}

/** Paint a map's cells into an L x L bitmap (one pixel a cell), then scale it onto `canvas`. */
function paintMap(ctx, map, vmax, off, x, y, size) {
  const n = map.length;
  const image = new ImageData(n, n);
  const colour = off ? greyOf : colourOf;
  for (let q = 0; q < n; q++) {
    for (let k = 0; k < n; k++) {
      const [r, g, b] = colour(map[q][k], vmax);
      const p = (q * n + k) * 4;
      image.data[p] = r;
      image.data[p + 1] = g;
      image.data[p + 2] = b;
      image.data[p + 3] = 255;
    }
  }
  const bitmap = document.createElement("canvas");
  bitmap.width = n;
  bitmap.height = n;
  bitmap.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(bitmap, x, y, size, size);
}

/** Size a canvas for `css` px (square unless h given) at the screen's pixel density. */
function sizeCanvas(canvas, w, h = w) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

/** The cell under a pointer event on a map drawn at `origin` with `cell` px cells, or null. */
function cellAt(event, canvas, origin, cell, n) {
  const box = canvas.getBoundingClientRect();
  const k = Math.floor((event.clientX - box.left - origin) / cell);
  const q = Math.floor((event.clientY - box.top - origin) / cell);
  return q >= 0 && k >= 0 && q < n && k < n ? { q, k } : null;
}

/**
 * A grid of head maps, one focusable button per head, and an enlarged view of one head.
 * heads: [{label, map: [q][k], off}], tokens: [L].
 */
class HeadGrid {
  constructor({ readout, minMap = 110, sameSizeAs = null }) {
    this.readout = readout;
    this.minMap = minMap;
    this.sameSizeAs = sameSizeAs; // lay out as if this many heads were shown (side-by-side models)
    this.node = el("div", { class: "mha-live-grid" });
    this.heads = [];
    this.tokens = [];
    this.vmax = 1;
    this.buttons = []; // one per head; the grid may also hold the enlarged map (placeZoom)
    this.columns = 1;
    this.zoomed = null; // {node, index}: the enlarged map placed in this grid, under the row of head `index`
  }

  /** Put the enlarged map `node` in this grid, on a row of its own under the row of head `index`. */
  placeZoom(node, index) {
    this.zoomed = { node, index };
    const anchor = this.buttons[rowEnd(Math.min(index, this.buttons.length - 1), this.columns, this.buttons.length)];
    if (anchor.nextSibling !== node) anchor.after(node);
  }

  /** Draw `heads` (replacing what was there), colour scale 0 .. vmax. */
  show(heads, tokens, vmax) {
    this.heads = heads;
    this.tokens = tokens;
    this.vmax = vmax;
    this.draw();
  }

  draw() {
    const width = this.node.parentNode ? this.node.parentNode.clientWidth : 600;
    const n = this.tokens.length;
    if (!this.heads.length || !n) return;
    const layout = gridLayout({ width, count: this.sameSizeAs || this.heads.length, length: n, minMap: this.minMap });
    this.node.style.gridTemplateColumns = `repeat(${layout.columns}, ${layout.map}px)`;
    this.columns = layout.columns;
    // reuse the buttons: a redraw after typing must not lose the keyboard focus
    while (this.buttons.length > this.heads.length) this.buttons.pop().remove();
    this.heads.forEach((head, i) => {
      let button = this.buttons[i];
      if (!button) {
        button = el("button", { type: "button", class: "mha-live-head" }, el("canvas"), el("span"));
        this.wire(button, i);
        if (i > 0) this.buttons[i - 1].after(button);
        else this.node.prepend(button);
        this.buttons.push(button);
      }
      const [canvas, caption] = button.children;
      setText(caption, head.off ? `${head.label} (off)` : head.label);
      button.setAttribute("aria-label", `${head.label}${head.off ? ", turned off" : ""}: attention map of ` +
        `${n} tokens; Enter enlarges it`);
      const ctx = sizeCanvas(canvas, layout.map);
      paintMap(ctx, head.map, this.vmax, head.off, 0, 0, layout.map);
      button.dataset.cell = String(layout.map / n);
    });
    // the enlarged map stays under its head's row (the number of columns may have changed)
    if (this.zoomed && this.zoomed.node.parentNode === this.node) this.placeZoom(this.zoomed.node, this.zoomed.index);
  }

  wire(button, i) {
    const canvas = button.firstChild;
    const show = (event) => {
      // on a touch screen a tap enlarges the map (click); its cells are read in the enlarged map
      if (event.pointerType === "touch") return;
      const head = this.heads[i];
      const at = cellAt(event, canvas, 0, Number(button.dataset.cell), this.tokens.length);
      if (head && at) setText(this.readout, readoutText(head.label, this.tokens, at.q, at.k, head.map[at.q][at.k]));
    };
    canvas.addEventListener("pointermove", show);
    canvas.addEventListener("pointerdown", show); // a pen or mouse press (touch: see above)
    button.addEventListener("click", () => this.onEnlarge && this.onEnlarge(i));
  }
}

/** One head enlarged: token labels on both axes, a cursor cell moved by the arrow keys. */
class ZoomView {
  constructor({ readout, onClose }) {
    this.readout = readout;
    this.title = el("p", { class: "mha-live-zoom-title" });
    this.canvas = el("canvas", { tabindex: "0", role: "img" });
    const close = el("button", { type: "button", class: "mha-live-button" }, "Close the enlarged map");
    close.addEventListener("click", () => onClose());
    this.node = el("div", { class: "mha-live-zoom", hidden: "" }, this.title, this.canvas, el("div", {}, close));
    this.cursor = { q: 0, k: 0 };
    this.canvas.addEventListener("keydown", (e) => this.key(e, onClose));
    const point = (event) => {
      if (!this.layout || !this.head) return;
      const at = cellAt(event, this.canvas, this.layout.margin, this.layout.cell, this.tokens.length);
      if (at) this.move(at.q, at.k);
    };
    this.canvas.addEventListener("pointermove", point);
    this.canvas.addEventListener("pointerdown", point);
  }

  open(head, tokens, vmax) {
    this.head = head;
    this.tokens = tokens;
    this.vmax = vmax;
    this.node.hidden = false;
    setText(this.title, `${head.label}${head.off ? " (turned off)" : ""}, enlarged: rows are queries, ` +
      "columns are keys. Arrow keys move through the cells; Escape closes.");
    this.cursor = { q: Math.min(this.cursor.q, tokens.length - 1), k: Math.min(this.cursor.k, tokens.length - 1) };
    this.draw();
  }

  draw() {
    if (this.node.hidden || !this.head) return;
    const n = this.tokens.length;
    const width = this.node.parentNode ? this.node.parentNode.clientWidth : 600;
    const probe = this.canvas.getContext("2d");
    probe.font = "12px sans-serif";
    const labels = this.tokens.map((t) => shortLabel(t));
    const labelWidth = Math.max(...labels.map((t) => probe.measureText(t).width));
    const layout = zoomLayout(width, n, labelWidth);
    this.layout = layout;
    const ctx = sizeCanvas(this.canvas, layout.size);
    ctx.clearRect(0, 0, layout.size, layout.size);
    paintMap(ctx, this.head.map, this.vmax, this.head.off, layout.margin, layout.margin, layout.cell * n);
    if (layout.labels) {
      ctx.fillStyle = "#222";
      ctx.font = "12px sans-serif";
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      labels.forEach((t, i) => ctx.fillText(t, layout.margin - 4, layout.margin + (i + 0.5) * layout.cell)); // queries
      labels.forEach((t, i) => { // keys, written upwards
        ctx.save();
        ctx.translate(layout.margin + (i + 0.5) * layout.cell, layout.margin - 4);
        ctx.rotate(-Math.PI / 2);
        ctx.textAlign = "left";
        ctx.fillText(t, 0, 0);
        ctx.restore();
      });
    }
    const { q, k } = this.cursor; // the cursor cell: a white-and-black frame, visible on any colour
    ctx.lineWidth = 2;
    ctx.strokeStyle = "#fff";
    ctx.strokeRect(layout.margin + k * layout.cell, layout.margin + q * layout.cell, layout.cell, layout.cell);
    ctx.lineWidth = 1;
    ctx.strokeStyle = "#000";
    ctx.strokeRect(layout.margin + k * layout.cell - 1, layout.margin + q * layout.cell - 1, layout.cell + 2, layout.cell + 2);
    this.canvas.setAttribute("aria-label", `${this.head.label}: ` +
      readoutText("cell", this.tokens, q, k, this.head.map[q][k]).replace(/^cell: /, ""));
  }

  move(q, k) {
    this.cursor = { q, k };
    setText(this.readout, readoutText(this.head.label, this.tokens, q, k, this.head.map[q][k]));
    this.draw();
  }

  key(event, onClose) {
    const n = this.tokens.length;
    const { q, k } = this.cursor;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (event.key in moves) {
      event.preventDefault();
      const [dq, dk] = moves[event.key];
      this.move(Math.min(n - 1, Math.max(0, q + dq)), Math.min(n - 1, Math.max(0, k + dk)));
    } else if (event.key === "Escape") {
      event.preventDefault();
      onClose();
    }
  }
}

/** The colour scale: a gradient from 0 to vmax. */
class Legend {
  constructor() {
    this.canvas = el("canvas", { "aria-hidden": "true" });
    this.low = el("span", {}, "0");
    this.high = el("span");
    this.node = el("div", { class: "mha-live-legend" }, el("span", {}, "weight "), this.low, this.canvas, this.high);
  }

  show(vmax) {
    const ctx = sizeCanvas(this.canvas, 120, 10);
    for (let x = 0; x < 120; x++) {
      const [r, g, b] = colourOf((x / 119) * vmax, vmax);
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      ctx.fillRect(x, 0, 1, 10);
    }
    setText(this.high, vmax.toFixed(2));
    this.node.setAttribute("aria-label", `colour scale: dark purple 0 to yellow ${vmax.toFixed(2)}`);
  }
}

// =============================================================================================
// 4. The views
// =============================================================================================

const STYLE = `
.mha-live { margin: 0.5rem 0 1rem; }
.mha-live-controls { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; align-items: center; margin-bottom: 0.5rem; }
.mha-live-controls label { font-weight: 600; }
.mha-live-controls input[type="checkbox"] { margin: 0 0.35em 0 0; vertical-align: middle; }
.mha-live textarea { width: 100%; box-sizing: border-box; font: inherit; padding: 0.3rem; }
.mha-live-privacy, .mha-live-note { font-size: 0.85em; margin: 0.2rem 0; }
.mha-live-status { font-size: 0.9em; margin: 0.3rem 0; }
.mha-live-status.mha-live-error { color: #a00; font-weight: 600; }
.mha-live-about { font-size: 0.8em; margin: 0.2rem 0; color: #444; }
.mha-live-readout { font-size: 0.9em; min-height: 2.6em; margin: 0.3rem 0 0; overflow-wrap: anywhere; }
/* Jupyter Book's output boxes scroll (overflow: auto), which would pin the sticky bar inside them: let the ones
   holding a live view overflow as usual (the views never scroll sideways; their wide parts scroll in their own box) */
div.cell_output:has(.mha-live-view), div.cell_output .output:has(.mha-live-view) { overflow: visible; }
.mha-live-bar { position: sticky; top: var(--mha-live-top, 0px); z-index: 3; padding: 0.2rem 0;
  background: var(--pst-color-background, #fff); border-bottom: 1px solid var(--pst-color-border, #ddd); }
.mha-live-grid { display: grid; gap: 8px; margin: 0.3rem 0; }
.mha-live-head { display: flex; flex-direction: column; align-items: center; padding: 0; border: 1px solid transparent;
  background: none; cursor: zoom-in; font: inherit; color: inherit; }
.mha-live-head span { font-size: 12px; line-height: 1.3; }
.mha-live-head canvas, .mha-live-zoom canvas { display: block; touch-action: manipulation; }
.mha-live :focus-visible { outline: 3px solid #1a5fb4; outline-offset: 2px; }
.mha-live-zoom { margin: 0.5rem 0; padding-bottom: 0.5rem;
  /* scrolled to: clear of the sticky header and readout above, and of the theme's "Back to top" button (90vh) below */
  scroll-margin-top: calc(var(--mha-live-top, 0px) + 5.5em); scroll-margin-bottom: 12vh; }
.mha-live-grid > .mha-live-zoom { grid-column: 1 / -1; }
.mha-live-zoom-title { font-size: 0.9em; margin: 0.2rem 0; }
.mha-live-legend { display: flex; align-items: center; gap: 0.3rem; font-size: 0.85em; }
.mha-live-button { font: inherit; padding: 0.15rem 0.6rem; margin: 0.2rem 0; }
.mha-live-layer-title { font-weight: 600; margin: 0.6rem 0 0.1rem; }
.mha-live-model { margin: 0.6rem 0; }
.mha-live-model-title { font-weight: 600; margin: 0.2rem 0; }
/* the sequence editor and every prediction strip share one column per position (scrolling in their box if narrow) */
.mha-live-sequence, .mha-live-strip { display: grid; grid-auto-flow: column; grid-auto-columns: 38px; gap: 3px;
  overflow-x: auto; padding-bottom: 2px; }
.mha-live-position { display: flex; flex-direction: column; align-items: center; gap: 2px; font-size: 12px; }
.mha-live-position select { font: inherit; font-size: 14px; width: 38px; min-height: 28px; padding: 0; }
.mha-live-position input[type="radio"] { width: 24px; height: 24px; margin: 0; }
.mha-live-strip { font-size: 12px; margin: 0.1rem 0 0.3rem; }
.mha-live-strip span { text-align: center; border: 1px solid #999; padding: 1px 0; white-space: nowrap; }
.mha-live-strip-caption { font-size: 0.85em; margin: 0.3rem 0 0; }
.mha-live-strip .mha-live-right { background: #e3f4e3; }
.mha-live-strip .mha-live-wrong { background: #fbe3e3; }
.mha-live-toggles { display: grid; grid-template-columns: auto repeat(12, minmax(0, 1fr)); gap: 2px; max-width: 560px; }
.mha-live-toggles button { font: inherit; font-size: 11px; padding: 4px 0; min-width: 0; border: 1px solid #777;
  background: #3b528b; color: #fff; }
.mha-live-toggles button[aria-pressed="false"] { background: #fff; color: #444; text-decoration: line-through; }
.mha-live-toggles span { font-size: 11px; align-self: center; padding-right: 4px; }
/* a focus ring seen on both states (dark "on", white "off"): orange, outside a white gap */
.mha-live-toggles button:focus-visible { outline: 3px solid #e66100; outline-offset: 1px; box-shadow: 0 0 0 1px #fff;
  position: relative; z-index: 1; }
.mha-live-scores { font-size: 0.95em; margin: 0.3rem 0; }
.mha-live-busy .mha-live-scores { opacity: 0.55; } /* the last run's scores, until this one ends */
.mha-live-scores strong { font-size: 1.1em; }
`;

function addStyle() {
  if (document.getElementById("mha-live-style")) return;
  const style = el("style", { id: "mha-live-style" });
  style.textContent = STYLE;
  document.head.append(style);
}

/** What every view shares: status line, download, readout, fallback, the test contract. */
class View {
  constructor(element, config, modelIds, backend = browserBackend) {
    this.element = element;
    this.config = config;
    this.modelIds = modelIds;
    this.backend = backend;
    this.kernel = backend.kind === "kernel"; // the notebook's kernel computes: the texts say so
    this.result = null;
    this.fallback = element.querySelector(".mha-live-fallback");
    this.root = el("div", { class: "mha-live", role: "group" });
    this.status = el("p", { class: "mha-live-status", role: "status" });
    this.about = el("p", { class: "mha-live-about" }); // which browsers, which model and runtime, their licences
    this.progress = el("progress", { hidden: "", max: "1", value: "0", "aria-label": "download progress" });
    this.readout = el("p", { class: "mha-live-readout", "aria-live": "polite" },
      "Point at a cell to read its query token, key token and weight; click a map to enlarge it. " +
      "On a touch screen, tap a map to enlarge it, then tap a cell.");
    this.legend = new Legend();
    // the colour scale and the readout stay in sight (sticky) while the reader points at the maps below
    this.bar = el("div", { class: "mha-live-bar" }, this.legend.node, this.readout);
    this.zoom = new ZoomView({ readout: this.readout, onClose: () => this.closeZoom() });
    this.timings = {};
    // runBert's progress callback: a split model fetching the word vectors of new words
    this.onFetch = (n, bytes) => this.busy(`Fetching word vectors (${n} files, ${formatMB(bytes)}), then computing ` +
      `${this.where}…`);
  }

  /**
   * Put the view on the page: the line saying what runs here, its controls, then the status line (download size, progress,
   * messages), the colour scale, the cell readout and the enlarged map, then the maps. The
   * fallback figure is hidden while the live view works.
   */
  attach(controls, maps) {
    // the "what runs here" line first: seen before trying, and its links do not sit, for the Tab key,
    // between the controls and the maps
    this.root.append(this.about, ...controls, this.status, this.progress, this.bar, this.zoom.node, ...maps);
    this.element.append(this.root);
    this.stickUnderHeader();
    for (const note of this.element.querySelectorAll(".mha-live-noscript")) note.hidden = true;
    if (this.fallback) this.fallback.hidden = true;
    new ResizeObserver(debounce(() => this.redraw(), 100)).observe(this.root);
    this.describeRuntime(null);
    this.announceSize();
    // another view of the page that loads the runtime or a model changes what this one will download
    loadListeners.add(() => {
      if (this.mayAnnounce()) this.announceSize();
    });
  }

  /**
   * The "what runs here" line, always visible: the browsers that run the view (WebAssembly SIMD),
   * the model(s) and the runtime with links to their licence notices (links once the manifest is read).
   */
  describeRuntime(manifest) {
    if (this.kernel) {
      setText(this.about, `Computed by this notebook's kernel with mha_lib (PyTorch): ` +
        `${this.modelIds.length > 1 ? "models" : "model"} ${this.modelIds.join(", ")}.`);
      return;
    }
    const children = ["Runs in browsers with WebAssembly SIMD (recent Chrome, Edge, Firefox, Safari). "];
    licenceParts(this.modelIds, manifest).forEach((part, i) => {
      if (i) children.push(" · ");
      children.push(part.label);
      const inner = [part.detail, part.href ? el("a", { href: part.href }, "licence") : ""].filter((x) => x);
      if (inner.length) children.push(" (", ...inner.flatMap((x, j) => (j ? ["; ", x] : [x])), ")");
    });
    this.about.replaceChildren(...children);
  }

  /**
   * Before any download: what the first action will fetch, in megabytes (from the manifest). A
   * manifest that cannot be read is no error yet: the size is said to be unknown, and the first
   * action asks for the manifest again.
   */
  async announceSize() {
    if (this.kernel) {
      if (this.mayAnnounce()) {
        setText(this.status, `${this.firstActionText} The notebook's kernel recomputes it with mha_lib.`);
      }
      return;
    }
    if (!supportsWasmSimd()) {
      this.fail(new Error("this browser cannot run WebAssembly with SIMD"));
      return;
    }
    const many = this.modelIds.length > 1 ? "models" : "model";
    let what = `the ${many} and the runtime (their size is unknown: the list of models could not be read)`;
    try {
      const manifest = await getManifest();
      this.describeRuntime(manifest);
      const fresh = this.modelIds.filter((id) => !loaded.has(id)); // another view may have loaded some
      const model = fresh.reduce((sum, id) => sum + ((manifest.models[id] || {}).bytes || 0), 0);
      const runtime = loaded.has("runtime") ? 0 : await getRuntimeBytes();
      what = downloadText(fresh.length, model, runtime);
      const split = fresh.map((id) => manifest.models[id] || {}).find((m) => m.token_rows);
      if (split) what += this.wordVectorsNote(split);
    } catch (err) {
      console.warn("mha_live: the download size is unknown:", err);
    }
    if (this.mayAnnounce()) {
      setText(this.status, what
        ? `${this.firstActionText} The first time, your browser downloads ${what}; it keeps them.`
        : `${this.firstActionText} Everything it needs is already loaded.`);
    }
  }

  /** Load every model of the view once, showing the bytes received. After a failure, only "Try again" retries. */
  ensureModels() {
    if (this.failed) return Promise.reject(this.error);
    if (!this.loading && this.kernel) {
      const started = performance.now();
      setText(this.status, "The kernel is loading the model…");
      this.loading = Promise.all(this.modelIds.map((id) => this.backend.loadModel(id))).then((models) => {
        this.loadedModels(models, started);
        setText(this.status, `The kernel loaded the model in ${(this.timings.load_ms / 1000).toFixed(1)} s; ` +
          "it computes every change.");
        return models;
      });
      this.loading.catch((err) => {
        this.loading = null;
        this.fail(err, true);
      });
    }
    if (!this.loading) {
      const received = {}; // file -> bytes so far
      // What is left to download: files that no view of the page has asked for yet.
      const total = async () => {
        const manifest = await getManifest();
        const fresh = this.modelIds.filter((id) => !modelPromises.has(id));
        return fresh.reduce((s, id) => s + ((manifest.models[id] || {}).bytes || 0), 0) + (ortPromise ? 0 : await getRuntimeBytes());
      };
      const started = performance.now();
      const attempt = (this.attempt = (this.attempt || 0) + 1);
      this.loading = total().then((all) => {
        getManifest().then((m) => this.describeRuntime(m), () => {}); // licence links, if they were missing
        this.progress.hidden = all === 0;
        const what = this.modelIds.length > 1 ? "the models" : "the model";
        const whatAll = ortPromise ? what : `${what} and the runtime`;
        setText(this.status, all ? `Downloading ${whatAll}: 0 of ${formatMB(all)}…` : "Preparing the model…");
        const onBytes = (what, n) => {
          if (this.failed || attempt !== this.attempt) return; // a file that failed stops the count
          received[what] = n;
          const got = Object.values(received).reduce((a, b) => a + b, 0);
          this.progress.max = Math.max(all, got);
          this.progress.value = got;
          setText(this.status, `Downloading ${whatAll}: ${formatMB(got)} of ${formatMB(Math.max(all, got))}…`);
        };
        return Promise.all(this.modelIds.map((id) => this.backend.loadModel(id, onBytes)));
      }).then((models) => {
        this.loadedModels(models, started);
        setText(this.status, `${this.modelIds.length > 1 ? "The models run" : "The model runs"} in your browser ` +
          `(loaded in ${(this.timings.load_ms / 1000).toFixed(1)} s).`);
        return models;
      });
      this.loading.catch((err) => {
        this.loading = null;
        this.fail(err, true);
      });
    }
    return this.loading;
  }

  /** The models are loaded: the live maps replace the figure that a failure showed. */
  loadedModels(models, started) {
    this.models = models;
    this.loaded = true;
    this.failed = false;
    this.status.classList.remove("mha-live-error");
    this.progress.hidden = true;
    if (this.fallback) this.fallback.hidden = true;
    this.timings.load_ms = performance.now() - started;
  }

  /** A visible message, and the static figure comes back; `retry` offers a "Try again" button. */
  fail(err, retry = false) {
    this.failed = true;
    this.error = err instanceof Error ? err : new Error(String(err));
    this.progress.hidden = true;
    this.status.classList.add("mha-live-error");
    setText(this.status, this.kernel
      ? `The kernel could not load the model (${this.error.message}). The maps shown are the ones computed when ` +
        "the cell ran" + (this.fallback ? ", as is the figure below." : ".")
      : `The live model could not be loaded (${this.error.message}). The maps shown are the ` +
        "ones computed when the book was built" + (this.fallback ? ", as is the figure below." : "."));
    if (retry) {
      const again = el("button", { type: "button", class: "mha-live-button" }, "Try again");
      again.addEventListener("click", () => {
        this.failed = false;
        this.note("Trying again…");
        this.ensureModels().catch(() => {});
      });
      this.status.append(" ", again);
    }
    if (this.fallback) this.fallback.hidden = false;
  }

  /** The download note may (re)write the status: nothing loads or failed yet, and no message of a run() is shown. */
  mayAnnounce() {
    return !this.loaded && !this.failed && !this.loading && !this.spoke;
  }

  /**
   * An input run() refuses: a visible error naming the value; the maps and the state stay as they were.
   * @returns {Error} err, for the caller to throw
   */
  refuse(err) {
    this.spoke = true;
    this.status.classList.add("mha-live-error");
    setText(this.status, `This input was refused: ${err.message}. The maps show the last result.`);
    return err;
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
    this.zoom.open(head, tokens, vmax);
    this.zoom.canvas.focus({ preventScroll: true });
    this.zoom.node.scrollIntoView({ block: "nearest" });
  }

  closeZoom() {
    this.zoom.node.hidden = true;
    if (this.lastFocus) this.lastFocus.focus();
  }

  /** Run `work` (a Promise-returning function) after the models load; keep the timings. */
  /**
   * What a split model (token rows in files) fetches besides its file, for the download note:
   * for each new text, the row files of its words (the range the build measured on its check texts).
   */
  wordVectorsNote(info) {
    const files = (info.checked || {}).row_files_per_text;
    if (!files) return ", then the word vectors of the words of each new text";
    const bytes = info.token_rows.file_bytes;
    return `, then the word vectors of the words of each new text (a median ${formatMB(files.median * bytes)} ` +
      `over the build's test sentences, at most ${formatMB(files.max * bytes)})`;
  }

  /** While work runs: "Fetching the word vectors…" when rows download, else "Computing…" after a moment. */
  busy(text) {
    if (!this.status.classList.contains("mha-live-error")) setText(this.status, text);
  }

  async compute(work) {
    await this.ensureModels();
    this.status.classList.remove("mha-live-error"); // a refused input's message gives way to this run's
    const t0 = performance.now();
    let result;
    const slow = setTimeout(() => this.busy(`Computing ${this.where}…`), 150); // no flicker for fast runs
    this.running = (this.running || 0) + 1;
    this.root.classList.add("mha-live-busy"); // the scores shown are the last run's until every run ends
    const done = () => {
      clearTimeout(slow);
      this.running -= 1;
      if (!this.running) this.root.classList.remove("mha-live-busy");
    };
    try {
      result = await work();
    } catch (err) {
      done();
      this.status.classList.add("mha-live-error");
      setText(this.status, `${this.kernel ? "The kernel" : "The model"} could not compute this input ` +
        `(${err && err.message ? err.message : err}). The maps show the last result.`);
      throw err;
    }
    done();
    this.timings.run_ms = performance.now() - t0;
    return result;
  }

  /** Where the maps are computed, for the notes: "in your browser" or "by the notebook's kernel". */
  get where() {
    return this.kernel ? "by the notebook's kernel" : "in your browser";
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
        return !!self.loaded;
      },
    };
  }
}

/** The layer control: a slider (aria-valuetext "layer 2 of 6") and an "all layers" switch. */
function layerControl(numLayers, start, onChange) {
  const id = `mha-live-layer-${Math.random().toString(36).slice(2)}`;
  const slider = el("input", { type: "range", id, min: "0", max: String(numLayers - 1), step: "1", value: String(start) });
  const value = el("output", { for: id });
  const all = el("input", { type: "checkbox", id: id + "-all" });
  const update = () => {
    const layer = Number(slider.value);
    const text = `layer ${layer} (${layer + 1} of ${numLayers})`;
    slider.setAttribute("aria-valuetext", text);
    setText(value, all.checked ? `layers 0–${numLayers - 1}` : text);
    slider.disabled = all.checked;
    onChange(all.checked ? "all" : layer);
  };
  slider.addEventListener("input", update);
  all.addEventListener("change", update);
  const node = el("div", { class: "mha-live-controls" },
    el("label", { for: id }, "Layer"), slider, value,
    el("span", {}, all, el("label", { for: id + "-all" }, "all layers")));
  return { node, update, slider, all, value };
}

/** Heads of the chosen layer(s), as HeadGrid entries. mask: [layer][head] 0/1 or null. */
function headsOf(attentions, which, mask) {
  const layers = which === "all" ? attentions.map((_, l) => l) : [which];
  return layers.map((l) => attentions[l].map((map, h) => ({ label: `L${l}.H${h}`, map, off: !!mask && !mask[l][h] })));
}

/** Shows MiniLM's maps of one text, one layer or all. Shared by the sentence and prune views. */
class LayerMaps {
  constructor(view, numLayers, start) {
    this.view = view;
    this.which = start;
    this.node = el("div");
    this.grids = [];
    this.control = layerControl(numLayers, start, (which) => {
      this.which = which;
      this.draw();
    });
  }

  show(tokens, attentions, mask = null) {
    this.tokens = tokens;
    this.attentions = attentions;
    this.mask = mask;
    this.draw();
  }

  draw() {
    if (!this.attentions) return;
    const groups = headsOf(this.attentions, this.which, this.mask);
    const vmax = largestWeight(groups.flat().map((h) => h.map));
    this.view.legend.show(vmax);
    // one grid per layer shown, each under its title; grids are reused between redraws
    while (this.grids.length > groups.length) this.grids.pop().box.remove();
    groups.forEach((heads, i) => {
      if (!this.grids[i]) {
        const grid = new HeadGrid({ readout: this.view.readout, minMap: groups.length > 1 ? 72 : 110 });
        const title = el("p", { class: "mha-live-layer-title" });
        const box = el("div", {}, title, grid.node);
        this.node.append(box);
        this.grids[i] = { grid, title, box };
      }
      const { grid, title } = this.grids[i];
      grid.minMap = groups.length > 1 ? 72 : 110;
      title.hidden = groups.length === 1;
      setText(title, `layer ${heads[0].label.split(".")[0].slice(1)}`);
      grid.onEnlarge = (h) => {
        this.view.lastFocus = grid.buttons[h];
        this.view.enlarge(grid.heads[h], this.tokens, vmax, grid, h);
      };
      grid.show(heads, this.tokens, vmax);
    });
    if (!this.view.zoom.node.hidden && this.view.zoom.head) {
      const label = this.view.zoom.head.label; // keep the enlarged head, with its new weights, under its row
      const i = groups.findIndex((heads) => heads.some((h) => h.label === label));
      if (i >= 0) {
        const h = groups[i].findIndex((x) => x.label === label);
        this.grids[i].grid.placeZoom(this.view.zoom.node, h);
        this.view.zoom.open(groups[i][h], this.tokens, vmax);
      } else {
        this.view.zoom.node.hidden = true; // its layer is no longer shown
        this.view.root.insertBefore(this.view.zoom.node, this.node);
      }
    }
  }
}

/** "sentence": MiniLM on the reader's text. */
class SentenceView extends View {
  constructor(element, config, backend) {
    super(element, config, [element.dataset.model || MINILM], backend);
    this.firstActionText = "Type a sentence of your own: the model reruns as you type.";
    const id = `mha-live-text-${Math.random().toString(36).slice(2)}`;
    // no maxlength: the box keeps all the reader gives; the status says how much of it the model reads
    this.text = el("textarea", { id, rows: "2", spellcheck: "false" });
    this.text.value = config.text || "";
    const label = el("label", { for: id }, "Your sentence");
    const privacy = el("p", { class: "mha-live-privacy" }, this.kernel
      ? "Typed text goes to this notebook's kernel, which computes the maps with mha_lib."
      : "Typed text never leaves your browser: the model runs on this page.");
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
    if (!text.trim()) {
      this.note("The text is empty: type a sentence. The maps show the last one.");
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

/** What the model reads of a text longer than its limit: the whole text stays in the box. */
export function truncationText(text, fullLength, kept) {
  const chars = Array.from(text).length.toLocaleString("en-US");
  return `Your text (${chars} characters) has ${fullLength.toLocaleString("en-US")} tokens; the model reads at most ` +
    `${kept}, so the maps are of its first ${kept} tokens only. The box keeps your whole text.`;
}

/** "toy-compare": chapter 1's task read by several toy models at once. */
class ToyCompareView extends View {
  constructor(element, config, backend) {
    super(element, config, config.models.slice(), backend);
    this.primary = config.models.includes(element.dataset.model) ? element.dataset.model : config.models[0];
    this.firstActionText = "Change a token or move the mark: every model reruns.";
    this.task = config.task; // mha_lib's PrevMarkedTask.to_dict(): {kind, vocab_size, seq_len, op}
    this.ids = config.ids.slice();
    this.types = config.types.slice();
    this.root.setAttribute("aria-label", "Live attention maps and predictions of the toy models on a sequence you edit");
    this.editor = this.buildEditor();
    this.sections = config.models.map((id) => this.buildSection(id));
    const most = Math.max(...config.models.map((id) => config.results[id].attentions[0].length));
    this.sections.forEach((s) => { s.grid.sameSizeAs = most; });
    this.attach([this.editor], this.sections.map((s) => s.node));
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
    const rows = el("div", { class: "mha-live-sequence", role: "group", "aria-label": "the sequence: tokens and the mark" });
    this.selects = [];
    this.marks = [];
    const name = `mha-live-mark-${Math.random().toString(36).slice(2)}`;
    this.ids.forEach((t, i) => {
      const select = el("select", { "aria-label": `token at position ${i}` });
      for (let v = 0; v < V; v++) select.append(el("option", { value: String(v) }, String(v)));
      select.value = String(t);
      select.addEventListener("change", () => {
        this.ids[i] = Number(select.value);
        this.changed();
      });
      const mark = el("input", { type: "radio", name, "aria-label": `mark position ${i}` });
      mark.checked = this.types[i] === 1;
      mark.addEventListener("change", () => {
        this.types = this.types.map((_, j) => (j === i ? 1 : 0));
        this.changed();
      });
      this.selects.push(select);
      this.marks.push(mark);
      rows.append(el("div", { class: "mha-live-position" }, el("span", {}, String(i)), select, mark));
    });
    this.rule = el("p", { class: "mha-live-note" });
    const help = el("p", { class: "mha-live-note" },
      "Pick a token at any position, and the marked position with the round buttons. " +
      "Each model predicts every position's label; ✓ right, ✗ wrong.");
    // on a narrow screen the positions scroll sideways: say so (redraw() shows it only then)
    this.scrollHint = el("p", { class: "mha-live-note", hidden: "" },
      `Scroll the row sideways for all ${this.ids.length} positions; the predictions below scroll the same way.`);
    this.sequence = rows;
    return el("div", {}, help, rows, this.scrollHint, this.rule);
  }

  refreshEditor() {
    this.selects.forEach((s, i) => { s.value = String(this.ids[i]); });
    this.marks.forEach((m, i) => { m.checked = this.types[i] === 1; });
    const m = this.types.indexOf(1);
    setText(this.rule, `Label at position i: (token i−1 ${this.task.op === "add" ? "+" : "−"} marked token) mod ` +
      `${this.task.vocab_size}; the marked token is ${this.ids[m]}, at position ${m}.`);
  }

  buildSection(id) {
    const title = el("p", { class: "mha-live-model-title" });
    const grid = new HeadGrid({ readout: this.readout, minMap: 128 });
    const captionId = `mha-live-strip-${Math.random().toString(36).slice(2)}`;
    const caption = el("p", { class: "mha-live-strip-caption", id: captionId },
      "prediction at each position (✓ right, ✗ wrong)");
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
    for (const s of this.sections) {
      const r = result.models[s.id];
      const H = r.attentions[0].length;
      const heads = r.attentions.flatMap((layer, l) => layer.map((map, h) => ({
        label: `${s.id} ${r.attentions.length > 1 ? `L${l}.` : ""}H${h}`, map, off: false })));
      s.grid.show(heads, result.tokens, vmax);
      const right = r.correct.filter((c) => c === true).length;
      const asked = r.correct.filter((c) => c !== null).length;
      setText(s.title, `${s.id}: ${H} head${H > 1 ? "s" : ""}, ${right} of ${asked} positions right`);
      s.strip.replaceChildren(...r.predictions.map((p, i) => {
        const c = r.correct[i];
        const cell = el("span", { role: "listitem", class: c === null ? "" : c ? "mha-live-right" : "mha-live-wrong" });
        setText(cell, c === null ? "–" : `${p}${c ? "✓" : "✗"}`);
        cell.setAttribute("aria-label", c === null ? `position ${i}: no label` :
          `position ${i}: predicts ${p}, the label is ${r.labels[i]}, ${c ? "right" : "wrong"}`);
        return cell;
      }));
    }
    this.result = result;
  }

  redraw() {
    for (const s of this.sections) s.grid.draw();
    this.zoom.draw();
    if (this.sequence) this.scrollHint.hidden = this.sequence.scrollWidth <= this.sequence.clientWidth + 1;
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
    const request = (this.requests += 1);
    const result = await this.compute(async () => {
      const t0 = performance.now();
      const out = {};
      for (const model of this.models) out[model.id] = await runToy(model, ids, types);
      const t1 = performance.now();
      this.timings.infer_ms = t1 - t0;
      const described = this.describe(out, ids, types, this.backend.kind);
      if (request === this.requests) this.showAll(described);
      this.timings.draw_ms = performance.now() - t1;
      return described;
    });
    if (request === this.requests) this.note(`Recomputed ${this.where} in ${Math.round(this.timings.run_ms)} ms.`);
    return result;
  }
}

/** "prune": MiniLM with head toggles; fidelity and paraphrase ranking against all heads on. */
class PruneView extends View {
  constructor(element, config, backend) {
    super(element, config, [element.dataset.model || MINILM], backend);
    this.firstActionText = "Turn heads off and on: the embeddings and the scores are recomputed.";
    this.tokenIds = isList(config.token_ids) ? config.token_ids.filter(Number.isInteger) : null;
    this.mask = config.mask.map((row) => row.map((v) => (v ? 1 : 0)));
    this.text = config.text;
    this.root.setAttribute("aria-label", "Turn MiniLM's heads off and watch the embeddings and the maps change");
    this.scores = el("p", { class: "mha-live-scores", "aria-live": "polite" });
    this.maps = new LayerMaps(this, config.attentions.length, config.layer || 0);
    this.sentenceNote = el("p", { class: "mha-live-note" });
    this.attach([this.buildToggles(), this.scores, this.sentenceNote, this.maps.control.node], [this.maps.node]);
    // the download notice (sizes) before the toggles: read before the first click
    this.root.insertBefore(this.progress, this.about.nextSibling);
    this.root.insertBefore(this.status, this.progress);
    this.describeSentence();
    this.result = { tokens: config.tokens, attentions: config.attentions, mask: this.mask, fidelity: config.fidelity,
      mrr: config.mrr, source: "config" };
    this.showScores(config.fidelity, config.mrr);
    this.maps.control.update();
    this.maps.show(config.tokens, config.attentions, this.mask);
    this.later = debounce(() => this.run({ mask: this.mask }).catch(() => {}), TOGGLE_DELAY_MS);
  }

  buildToggles() {
    const [NL, H] = [this.mask.length, this.mask[0].length];
    const grid = el("div", { class: "mha-live-toggles", role: "group",
      "aria-label": `heads: ${NL} layers x ${H}; pressed = on; arrow keys move between heads` });
    grid.append(el("span"));
    for (let h = 0; h < H; h++) grid.append(el("span", { "aria-hidden": "true" }, `H${h}`));
    this.toggles = [];
    for (let l = 0; l < NL; l++) {
      grid.append(el("span", { "aria-hidden": "true" }, `L${l}`));
      const row = [];
      for (let h = 0; h < H; h++) {
        // one Tab stop for the whole grid (roving tabindex): the arrow keys move, Space or Enter toggles
        const button = el("button", { type: "button", "aria-label": `layer ${l} head ${h}`, title: `L${l}.H${h}`,
          tabindex: l === 0 && h === 0 ? "0" : "-1" }, String(h));
        button.addEventListener("click", () => {
          this.mask[l][h] = this.mask[l][h] ? 0 : 1;
          this.rove(l, h, false);
          this.toggled();
        });
        button.addEventListener("keydown", (event) => {
          const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
          let to = null;
          if (event.key in moves) to = [l + moves[event.key][0], h + moves[event.key][1]];
          else if (event.key === "Home") to = [event.ctrlKey ? 0 : l, 0];
          else if (event.key === "End") to = [event.ctrlKey ? NL - 1 : l, H - 1];
          if (!to) return;
          event.preventDefault();
          this.rove(Math.min(NL - 1, Math.max(0, to[0])), Math.min(H - 1, Math.max(0, to[1])), true);
        });
        row.push(button);
        grid.append(button);
      }
      this.toggles.push(row);
    }
    const allOn = el("button", { type: "button", class: "mha-live-button" }, "All heads on");
    allOn.addEventListener("click", () => {
      this.mask = this.mask.map((row) => row.map(() => 1));
      this.toggled();
    });
    this.refreshToggles();
    return el("div", {}, el("p", { class: "mha-live-note" }, "Click a head to turn it off or on (pressed = on); " +
      "with the keyboard, Tab into the grid, move with the arrow keys and toggle with Space."), grid, allOn);
  }

  /** Make toggle (l, h) the grid's one Tab stop; `focus` moves the keyboard focus there. */
  rove(l, h, focus) {
    this.toggles.flat().forEach((b) => b.setAttribute("tabindex", "-1"));
    this.toggles[l][h].setAttribute("tabindex", "0");
    if (focus) this.toggles[l][h].focus();
  }

  describeSentence(text = this.text) {
    setText(this.sentenceNote, `The maps below are those of the sentence “${text}”: a head turned off still ` +
      "computes its weights (drawn grey), but its output no longer reaches the next layer.");
  }

  refreshToggles() {
    this.toggles.forEach((row, l) => row.forEach((b, h) => b.setAttribute("aria-pressed", this.mask[l][h] ? "true" : "false")));
  }

  toggled() {
    this.refreshToggles();
    this.maps.show(this.maps.tokens, this.maps.attentions, this.mask); // grey at once; new weights follow
    this.ensureModels().catch(() => {});
    this.later();
  }

  showScores(fidelity, mrr, mask = this.mask) {
    const on = mask.flat().filter(Boolean).length;
    const total = mask.flat().length;
    this.scores.replaceChildren(
      `${on} of ${total} heads on. Embedding fidelity (mean cosine to the unpruned embeddings): `,
      el("strong", {}, fidelity.toFixed(3)),
      `. Paraphrase ranking (mean reciprocal rank of each paraphrase, 1 = always first; all heads on: ` +
      `${(this.reference ? this.reference.mrr : this.config.mrr_all).toFixed(3)}): `,
      el("strong", {}, mrr.toFixed(3)), ".");
  }

  redraw() {
    this.maps.draw();
    this.zoom.draw();
  }

  /** Its texts are known: the word vectors of their words, exactly (row files from the config's token ids). */
  wordVectorsNote(info) {
    if (!this.tokenIds || !this.tokenIds.length) return super.wordVectorsNote(info);
    const files = rowFilesFor(info.token_rows, this.tokenIds).length;
    return `, and the word vectors of the words of its sentence and ${this.config.texts.length} texts ` +
      `(${formatMB(files * info.token_rows.file_bytes)})`;
  }

  /** The embeddings with all heads on, once: the reference of fidelity. */
  async referenceEmbeddings() {
    if (!this.reference) {
      const full = this.mask.map((row) => row.map(() => 1));
      const r = await runBert(this.models[0], this.texts(), full, this.onFetch);
      const texts = r.embeddings.subarray(r.d); // row 0 is the sentence of the maps
      const scores = paraphraseScores(texts, texts, r.d, this.config.num_anchors);
      this.reference = { embeddings: r.embeddings, d: r.d, mrr: scores.mrr };
    }
    return this.reference;
  }

  /** The sentence first (its maps), then the texts of the scores; stripped as mha_lib does. */
  texts(text = this.text) {
    return [text, ...this.config.texts.map((t) => t.trim())];
  }

  /** run()'s input as {mask?: [layer][head] of 0/1 (a copy), text?}; throws, naming the value, on anything else. */
  checkInput(input) {
    const spec = typeof input === "string" ? { text: input } : input;
    if (!spec || typeof spec !== "object" || Array.isArray(spec)) {
      throw new Error(`run() takes {mask, text} or a sentence, got ${describeValue(input)}`);
    }
    const unknown = Object.keys(spec).filter((k) => k !== "mask" && k !== "text");
    if (unknown.length || (spec.mask === undefined && spec.text === undefined)) {
      throw new Error(`run() takes {mask, text} (at least one), got the keys [${Object.keys(spec).join(", ")}]`);
    }
    if (spec.text !== undefined && typeof spec.text !== "string") {
      throw new Error(`run({text}): the text must be a string, got ${describeValue(spec.text)}`);
    }
    const mask = spec.mask === undefined ? null : checkHeadMask(spec.mask, this.mask.length, this.mask[0].length);
    return { mask, text: spec.text };
  }

  /**
   * Recompute with a head mask. input: {mask?: [layer][head] of 0/1 or booleans, text?: sentence}
   * (at least one of them) or a string (the sentence). Resolves to lastResult = {tokens, attentions,
   * mask, fidelity, mrr}, of this call's mask and sentence. Rejects, state kept, on anything else:
   * the message names the offending value.
   */
  async run(input) {
    let spec;
    try {
      spec = this.checkInput(input);
    } catch (err) {
      throw this.refuse(err);
    }
    if (spec.text !== undefined && !spec.text.trim()) {
      this.note("The text is empty: the maps show the last one.");
      throw new Error("empty text");
    }
    const newMask = spec.mask;
    // the input is valid: it becomes the state (the toggles show it), and this call keeps its own copy
    if (spec.text !== undefined) this.text = spec.text;
    if (newMask) {
      this.mask = newMask;
      this.refreshToggles();
    }
    const mask = this.mask.map((row) => row.slice());
    const texts = this.texts();
    const out = await this.compute(async () => {
      const ref = await this.referenceEmbeddings();
      const t0 = performance.now();
      const r = await runBert(this.models[0], texts, mask, this.onFetch);
      const n = r.embeddings.length / r.d;
      const scores = paraphraseScores(r.embeddings.subarray(r.d), ref.embeddings.subarray(ref.d), r.d,
        this.config.num_anchors);
      const t1 = performance.now();
      this.timings.infer_ms = t1 - t0;
      this.maps.show(r.encodings[0].tokens, r.attentions, mask);
      this.showScores(scores.fidelity, scores.mrr, mask);
      this.describeSentence(texts[0]);
      this.timings.draw_ms = performance.now() - t1;
      return { tokens: r.encodings[0].tokens, attentions: r.attentions, mask, ...scores, texts: n - 1,
        source: this.backend.kind };
    });
    this.result = out;
    this.note(`Recomputed ${out.texts} embeddings and the maps ${this.where} in ${Math.round(this.timings.run_ms)} ms.`);
    return out;
  }
}

// =============================================================================================
// 5. Mounting
// =============================================================================================

const VIEWS = { sentence: SentenceView, "toy-compare": ToyCompareView, prune: PruneView };

/**
 * Turn one .mha-live-view element into a live view (once). Returns element.mhaLive.
 * A bad data-config leaves the fallback figure in place, with a visible message.
 * @param {HTMLElement} element
 * @param {{backend?: object}} [options]  backend: browserBackend (default) or kernelBackend(widget model)
 */
export function mount(element, { backend = browserBackend } = {}) {
  if (element.mhaLive) return element.mhaLive;
  addStyle();
  const view = element.dataset.view;
  try {
    const config = checkConfig(view, JSON.parse(element.dataset.config || "null"));
    const instance = new VIEWS[view](element, config, backend);
    element.mhaLive = instance.api(view, instance.primary || instance.modelIds[0]);
  } catch (err) {
    const message = el("p", { class: "mha-live-status mha-live-error", role: "status" });
    setText(message, `This live view could not start (${err.message}); the figure is the one computed when ` +
      `${backend.kind === "kernel" ? "the cell ran" : "the book was built"}.`);
    element.append(message);
    console.warn("mha_live:", err);
    element.mhaLive = { view, model: element.dataset.model, models: [], lastResult: null,
      run: () => Promise.reject(err), error: String(err.message) };
  }
  return element.mhaLive;
}

/** Mount every live view under `root` (the page). */
export function mountAll(root = document) {
  return Array.from(root.querySelectorAll(".mha-live-view")).map(mount);
}

// =============================================================================================
// 6. In a kernel: anywidget's entry point (mha_lib.live.LiveWidget loads this file as its _esm)
// =============================================================================================

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
