// compute.mjs -- running a model and reading its outputs, for either backend (no DOM, no network).
//
// Data shapes (every map is a plain nested array):
//   attentions  [layer][head][query][key]  weights in [0, 1], each query's row sums to 1
//   head mask   [layer][head]  1 = head on, 0 = off (its output is zeroed; its own weights are still computed)
// A model is what a backend's load() gives (see view.mjs): its session runs one call at a time (queued).
// Each run function takes an optional Clock (clock.mjs) that gets the update's feeds, run and read times.
// Every output the page reads passes checkFinite (float numbers, finite, 16-bit ones decoded) and every stacked
// map output checkMapDims (the layers and heads the model declares) before anything is drawn from it.
// Chapter 1's toy model runs here (runToy); the later chapters' models in compute_toys.mjs, MiniLM in compute_bert.mjs.

import { NO_CLOCK, nextTask } from "./clock.mjs";
import { t } from "./i18n.mjs";
import { headsText, layersText } from "./text.mjs";

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
/** A float16 bit pattern as a number (IEEE 754 binary16: 1 sign, 5 exponent, 10 fraction bits). */
function halfToNumber(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24; // zero and subnormals
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/**
 * The numbers of a float output, whatever holds them, or null for an output that is not float (ids, masks).
 * onnxruntime-web gives float16 as a Float16Array where the browser has one and as its raw bits in a
 * Uint16Array where not, and bfloat16 always as raw bits: those are decoded into a Float32Array.
 * @param {{type?: string, data}} tensor  an output of session.run (onnxruntime-web's or the kernel's)
 * @returns {ArrayLike<number>|null}
 */
export function floatNumbers(tensor) {
  const data = tensor?.data;
  const type = tensor?.type;
  const F16 = globalThis.Float16Array;
  if ((type === "float16" || type === "bfloat16") && data instanceof Uint16Array) {
    if (type === "float16") return Float32Array.from(data, halfToNumber);
    const bits = new Uint32Array(data.length);
    for (let i = 0; i < data.length; i++) bits[i] = data[i] << 16; // bfloat16 is float32's upper half
    return new Float32Array(bits.buffer);
  }
  if (type === "float16" || type === "bfloat16" || type === "float32" || type === "float64") return data;
  if (type === undefined && (data instanceof Float32Array || data instanceof Float64Array || (F16 && data instanceof F16))) {
    return data;
  }
  return null;
}

/**
 * Refuse a backend's outputs holding NaN or ±Infinity, before anything is drawn from them (a damaged
 * weight would draw as dark cells and count as wrong predictions): every float output, whatever its type
 * (float16, bfloat16, float32, float64; floatNumbers). Returns the outputs with each float output readable
 * as numbers: a 16-bit one given as raw bits comes back as {type: "float32", dims, data: Float32Array};
 * the same object when none is.
 * @param {string} modelId
 * @param {Object<string, {type, data, dims}>} outputs  session.run's outputs
 * @returns {Object<string, {type, data, dims}>}
 * @throws {Error} `the model ch1-h2 computed non-finite attentions: 2048 of 2048 values (2048 NaN), the first at index 0`
 */
export function checkFinite(modelId, outputs) {
  let readable = outputs;
  for (const [name, tensor] of Object.entries(outputs)) {
    const data = floatNumbers(tensor);
    if (data === null) continue;
    let nan = 0;
    let infinite = 0;
    let other = 0;
    let first = -1;
    for (let i = 0; i < data.length; i++) {
      const v = data[i];
      if (Number.isFinite(v)) continue;
      if (first < 0) first = i;
      if (Number.isNaN(v)) nan += 1;
      else if (v === Infinity || v === -Infinity) infinite += 1;
      else other += 1;
    }
    const bad = nan + infinite + other;
    if (bad) {
      const kinds = [nan ? `${nan} NaN` : "", infinite ? `${infinite} ±Infinity` : "", other ? `${other} not numbers` : ""]
        .filter((x) => x).join(", ");
      throw new Error(`the model ${modelId} computed non-finite ${name}: ${bad} of ${data.length} values (${kinds}), ` +
        `the first at index ${first}`);
    }
    if (data !== tensor.data) {
      if (readable === outputs) readable = { ...outputs };
      readable[name] = { type: "float32", dims: tensor.dims, data };
    }
  }
  return readable;
}

/**
 * Check a stacked map output, before a map is read from it, against what the model declares (model.info's
 * num_layers and num_heads, its head_mask's shape): dims [num_layers, rows, H, T, S], rows from 1 to the B
 * sequences run (the page reads row 0; the kernel returns row 0 alone). An encoder-decoder's
 * cross-attention stacks its decoder's layers only: `layers: "at most"` lets it have fewer.
 * @param {object} model   a Model (view.mjs): model.id, model.info.num_layers, model.info.num_heads
 * @param {string} name    the output ("attentions", "cross_attentions")
 * @param {{type?: string, dims, data}} tensor
 * @param {number[]} shape [B, T, S] the run asked for
 * @returns {{type?: string, dims, data}} the tensor
 * @throws {Error} naming the model, the output, its dims and what the model declares
 */
export function checkMapDims(model, name, tensor, [B, T, S], { layers = "all" } = {}) {
  const { num_layers: NL, num_heads: H } = model.info;
  const dims = tensor?.dims ? Array.from(tensor.dims, Number) : null;
  const fits = dims && dims.length === 5 && (layers === "all" ? dims[0] === NL : dims[0] >= 1 && dims[0] <= NL) &&
    dims[1] >= 1 && dims[1] <= B && dims[2] === H && dims[3] === T && dims[4] === S;
  if (!fits) {
    throw new Error(t("the model {model} returned {output} of dims [{dims}]; it declares {layers} of {heads}, and " +
      "the page ran {batch} × {tokens} tokens", { model: model.id, output: name, dims: dims ? dims.join(",") : "none",
      layers: layersText(NL), heads: headsText(H), batch: B, tokens: T }));
  }
  return tensor;
}

/**
 * Check a logits output, before a prediction is read from it: dims [B, T, C] of the run (C >= 1 classes) and
 * as many values as they say.
 * @returns {{type?: string, dims, data}} the tensor
 * @throws {Error} naming the model, its dims and the run's
 */
export function checkLogitsDims(model, tensor, [B, T]) {
  const dims = tensor?.dims ? Array.from(tensor.dims, Number) : null;
  const fits = dims && dims.length === 3 && dims[0] === B && dims[1] === T && dims[2] >= 1 &&
    tensor.data && tensor.data.length === B * T * dims[2];
  if (!fits) {
    throw new Error(t("the model {model} returned logits of dims [{dims}]; the page ran {batch} × {tokens} tokens",
      { model: model.id, dims: dims ? dims.join(",") : "none", batch: B, tokens: T }));
  }
  return tensor;
}

/**
 * The most a reader's own model may declare (its head_mask: num_layers x num_heads) for the page to run and draw
 * it: every map is a canvas, and the toy view draws all of them at once (BERT-large has 24 layers of 16 heads,
 * 384 maps). A run allocates the head mask before anything else, so the limit is checked first.
 */
export const OWN_MODEL_LIMITS = Object.freeze({ layers: 48, heads: 64, maps: 1024 });

/**
 * A reader's own model, checked before any view draws it: the size it declares (model.info: its head_mask's
 * num_layers x num_heads) within OWN_MODEL_LIMITS, before it runs; then one run on `ids` (one sequence), whose
 * float outputs must be finite (checkFinite), whose `expect` outputs must be float, and whose attentions must
 * be (num_layers, 1, num_heads, L, L): what it declares.
 * @param {object} model       a Model (view.mjs) whose info holds num_layers and num_heads
 * @param {number[]} ids       a short sequence the model reads ([CLS] [SEP], a toy sequence)
 * @param {number[]|null} types  its token types, or null
 * @param {string[]} expect    the outputs the view reads as numbers
 * @returns {Promise<object>}  the run's checked outputs
 * @throws {Error} naming the file and the offending size, output or value
 */
export async function checkOwnModel(model, ids, types, expect = ["logits", "attentions"]) {
  const { num_layers: NL, num_heads: H } = model.info;
  const limits = OWN_MODEL_LIMITS;
  if (!(NL <= limits.layers && H <= limits.heads && NL * H <= limits.maps)) {
    throw new Error(t("“{name}” declares {layers} of {heads}; the page draws at most {most_layers} layers, {most_heads} " +
      "heads a layer and {most_maps} maps", { name: model.id, layers: layersText(NL), heads: headsText(H),
      most_layers: limits.layers, most_heads: limits.heads, most_maps: limits.maps }));
  }
  const raw = await runSession(model, feedsFor(model, [ids], types ? [types] : null, null));
  for (const name of expect) {
    if (!raw[name] || floatNumbers(raw[name]) === null) {
      throw new Error(t("“{name}” returned its {output} as {type}, not as float numbers",
        { name: model.id, output: name, type: raw[name] ? String(raw[name].type) : "nothing" }));
    }
  }
  const out = checkFinite(model.id, raw);
  checkMapDims(model, "attentions", out.attentions, [1, ids.length, ids.length]);
  if (out.logits) checkLogitsDims(model, out.logits, [1, ids.length]);
  return out;
}

/**
 * Run `task` (async) after every earlier task of the model, in call order: onnxruntime-web runs one
 * session call at a time, and a run that must first fetch word vectors may not be overtaken by a
 * later one that needs none (the maps of an older text would land last).
 */
export function queued(model, task) {
  const next = model.queue.then(task);
  model.queue = next.catch(() => {});
  return next;
}

/** Run a session, one call at a time per model; its time (the call, not the wait in the queue) goes to `clock`. */
export function runSession(model, feeds, clock = NO_CLOCK) {
  return queued(model, () => clock.run(model.session, feeds));
}

/** The head_mask input, (num_layers, H) float32, from [layer][head] 0/1. */
export function headMaskTensor(model, mask) {
  const { num_layers: NL, num_heads: H } = model.info;
  const data = new Float32Array(NL * H).fill(1);
  if (mask) mask.forEach((row, l) => row.forEach((on, h) => { data[l * H + h] = on ? 1 : 0; }));
  return new model.ort.Tensor("float32", data, [NL, H]);
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
export function feedsFor(model, rows, types, mask, attnMask = null) {
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
  if (attnMask) all.attn_mask = new Tensor("bool", attnMask, [L, L]); // chapter 9: the pattern, 1 = blocked
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

/** A toy TokenClassifier on one sequence: maps, predictions per position. */
export async function runToy(model, ids, types, clock = NO_CLOCK) {
  const feeds = clock.time("feeds", () => feedsFor(model, [ids], [types], null));
  const out = checkFinite(model.id, await runSession(model, feeds, clock));
  return clock.time("read", () => {
    const [, L, C] = checkLogitsDims(model, out.logits, [1, ids.length]).dims.map(Number);
    const att = checkMapDims(model, "attentions", out.attentions, [1, ids.length, ids.length]);
    return {
      attentions: attentionsFromOutput(att.data, att.dims, 0, ids.length),
      ...argmaxRows(out.logits.data, L, C),
      classes: C,
    };
  });
}

/**
 * `n` numbers in [-1, 1) from a seeded generator (Park-Miller), as a Float32Array: the same inputs at every visit.
 * With `chunk`, made `chunk` numbers a task (a Promise then): half a million of them hold a busy page's thread
 * for over 50 ms in one go.
 */
export function seededFloats(n, seed, chunk = 0) {
  const out = new Float32Array(n);
  let s = seed % 2147483647 || 1;
  const fill = (from, to) => {
    for (let i = from; i < to; i++) {
      s = (s * 16807) % 2147483647;
      out[i] = (s / 2147483647) * 2 - 1;
    }
  };
  if (!chunk) {
    fill(0, n);
    return out;
  }
  return (async () => {
    for (let at = 0; at < n; at += chunk) {
      if (at) await nextTask();
      fill(at, Math.min(n, at + chunk));
    }
    return out;
  })();
}

/** The median of a list of numbers. */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * Time mha_lib's attention function (the site's attention-core.onnx) on q, k, v of shape (batch, H, L, d_model / H)
 * for every H in `heads`: the same FLOPs each time. One untimed warm-up round, then `repeats` rounds, each timing
 * every H once (round-robin, as mha_lib.measure.compare_times: a slow spell hits every H alike); after each round
 * `onRound(samples)` gets every time so far, so that a first curve shows after one round. A call's time runs from
 * handing the inputs to the runtime to getting the output back (its worker included).
 * @param {object} model  a Model (view.mjs) of attention-core.onnx
 * @param {{heads: number[], d_model: number, seq_len: number, batch: number, repeats: number}} spec
 * @param {{onProgress?: (done: number, total: number, H: number) => void, onRound?: (samples: number[][]) => void,
 *   clock?: object}} [options]
 * @returns {Promise<number[][]>} seconds of every timed call: [H index][round]
 */
export async function timeAttention(model, { heads, d_model: d, seq_len: L, batch: B, repeats },
  { onProgress = () => {}, onRound = () => {}, clock = NO_CLOCK } = {}) {
  const { Tensor } = model.ort;
  const n = B * L * d;
  const base = await clock.timeAsync("feeds", async () => { // made once, in tasks of 65536 numbers; copied per call
    const out = [];
    for (const seed of [1, 2, 3]) out.push(await seededFloats(n, seed, 1 << 16));
    return out;
  });
  const inputs = heads.map((H) => {
    const shape = [B, H, L, d / H];
    return () => ({ q: new Tensor("float32", base[0].slice(), shape), k: new Tensor("float32", base[1].slice(), shape),
      v: new Tensor("float32", base[2].slice(), shape) });
  });
  const samples = heads.map(() => []);
  const total = (repeats + 1) * heads.length;
  let done = 0;
  for (let round = 0; round <= repeats; round++) {
    for (let i = 0; i < heads.length; i++) {
      const feeds = clock.time("feeds", () => inputs[i]()); // made before the clock starts (the buffers go to the worker)
      const t0 = performance.now();
      const out = await runSession(model, feeds, clock);
      const seconds = (performance.now() - t0) / 1e3;
      checkFinite(model.id, out);
      if (round > 0) samples[i].push(seconds); // round 0 warms up
      done += 1;
      onProgress(done, total, heads[i]);
    }
    if (round > 0) onRound(samples.map((x) => x.slice()));
  }
  return samples;
}
