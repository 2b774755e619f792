// compute_toys.mjs -- the later chapters' small models on a reader's input, and what the views read of their
// outputs: chapter 5's induction heads, chapter 7's digits (a Vision Transformer, its [CLS] rollout), chapter 8's
// translation (cross-attention, step by step) and chapter 9's attention patterns. The shared machinery (feeds,
// the queue, the checks of every output) is compute.mjs's; the data shapes are those at its top.

import { NO_CLOCK } from "./clock.mjs";
import { argmaxRows, attentionsFromOutput, checkFinite, checkMapDims, feedsFor, headMaskTensor, runSession } from "./compute.mjs";

/**
 * Row 0 ([CLS]) of attention rollout (Abnar and Zuidema 2020), as mha_lib.analysis.attention_rollout:
 * A_l = (mean over heads of W_l + I) / 2 and R = A_n ... A_1; row 0 of R is e_0 A_n ... A_1.
 * @param {number[][][][]} attentions  [layer][head][query][key], L x L maps
 * @returns {number[]} L values: how much of each position flows into position 0 at the top
 */
export function clsRollout(attentions) {
  const L = attentions[0][0].length;
  let row = new Float64Array(L);
  row[0] = 1;
  for (let l = attentions.length - 1; l >= 0; l--) {
    const heads = attentions[l];
    const next = new Float64Array(L);
    for (let q = 0; q < L; q++) {
      if (!row[q]) continue;
      for (let k = 0; k < L; k++) {
        let mean = 0;
        for (const map of heads) mean += map[q][k];
        next[k] += row[q] * (0.5 * (mean / heads.length) + (q === k ? 0.5 : 0));
      }
    }
    row = next;
  }
  return Array.from(row);
}

/** A flat list of side * side values as [row][column]. */
function asGrid(values, side) {
  return Array.from({ length: side }, (_, r) => Array.from(values.slice(r * side, (r + 1) * side)));
}

/**
 * What the digit view shows of one run, as mha_lib.live.digit_readings: the ten probabilities, [CLS]'s
 * weights on the pixels of each head ([layer][head][row][column]) and on itself, and the rollout.
 * @param {number[][][][]} attentions  [layer][head][query][key], (1 + side^2) tokens, [CLS] first
 * @param {ArrayLike<number>} logits   the classes' logits
 * @param {number} side                pixels per image side (8)
 */
export function digitReadings(attentions, logits, side) {
  let best = 0;
  for (let c = 1; c < logits.length; c++) if (logits[c] > logits[best]) best = c;
  const exps = Array.from(logits, (x) => Math.exp(x - logits[best]));
  const total = exps.reduce((a, b) => a + b, 0);
  return {
    probabilities: exps.map((e) => e / total),
    prediction: best,
    cls: attentions.map((layer) => layer.map((map) => asGrid(map[0].slice(1), side))),
    cls_self: attentions.map((layer) => layer.map((map) => map[0][0])),
    rollout: asGrid(clsRollout(attentions).slice(1), side),
  };
}

/**
 * A chapter-7 Vision Transformer on one image: `pixels` (side * side grey levels in [0, 1], row by row)
 * as one-pixel patches (1, side^2, 1) after [CLS]; every head on.
 * @returns {Promise<{probabilities, prediction, cls, cls_self, rollout}>}  see digitReadings
 */
export async function runDigit(model, pixels, side, clock = NO_CLOCK) {
  const { Tensor } = model.ort;
  const feeds = clock.time("feeds", () => ({ patches: new Tensor("float32", Float32Array.from(pixels), [1, pixels.length, 1]),
    head_mask: headMaskTensor(model, null) }));
  for (const name of model.session.inputNames) {
    if (!(name in feeds)) throw new Error(`the model ${model.id} asks for an input "${name}" the digit view does not give`);
  }
  const out = checkFinite(model.id, await runSession(model, feeds, clock));
  return clock.time("read", () => {
    const C = Number(out.logits.dims[out.logits.dims.length - 1]);
    const att = checkMapDims(model, "attentions", out.attentions, [1, pixels.length + 1, pixels.length + 1]);
    const attentions = attentionsFromOutput(att.data, att.dims, 0, pixels.length + 1);
    return digitReadings(attentions, out.logits.data.subarray(0, C), side);
  });
}

/**
 * Positions i whose next token a copy can give, as mha_lib.live.copyable_positions: an earlier j < i has
 * x_j = x_i and x_{j+1} = x_{i+1} (chapter 5's repeated segment, and any repeat by chance).
 * @param {number[]} ids
 * @returns {number[]} ascending, in 0 .. L-2
 */
export function copyablePositions(ids) {
  const seen = new Set();
  const out = [];
  for (let i = 0; i + 1 < ids.length; i++) {
    const bigram = `${ids[i]},${ids[i + 1]}`;
    if (seen.has(bigram)) out.push(i);
    seen.add(bigram);
  }
  return out;
}

/** A head's mean weight on the previous token over queries 1 .. L-1 (mha_lib.analysis.previous_token_score). */
export function previousTokenScore(map) {
  let sum = 0;
  for (let q = 1; q < map.length; q++) sum += map[q][q - 1];
  return sum / (map.length - 1);
}

/**
 * A head's mean weight on induction targets (mha_lib.analysis.induction_score): for every query i whose token
 * occurred before, its summed weight on the keys j < i with x_{j-1} = x_i; null when no query has one.
 */
export function inductionScore(map, ids) {
  let sum = 0;
  let queries = 0;
  for (let i = 0; i < ids.length; i++) {
    let on = 0;
    let any = false;
    for (let j = 1; j < i; j++) {
      if (ids[j - 1] === ids[i]) {
        on += map[i][j];
        any = true;
      }
    }
    if (any) {
      sum += on;
      queries += 1;
    }
  }
  return queries ? sum / queries : null;
}

/**
 * What the induction view shows of one run, as mha_lib.live.induction_readings: the maps, each position's
 * next-token prediction and its probability, every head's previous-token and induction scores, the
 * copyable positions and the share of them predicted right (keys absent where mha_lib leaves them out).
 * @param {number[][][][]} attentions  [layer][head][query][key]
 * @param {Float32Array} logits        (L, V) row-major
 * @param {number[]} ids               the L tokens
 */
export function inductionReadings(attentions, logits, ids) {
  const L = ids.length;
  const { predictions, confidence } = argmaxRows(logits, L, logits.length / L);
  const copyable = copyablePositions(ids);
  const out = { attentions, predictions, confidence,
    previous: attentions.map((layer) => layer.map(previousTokenScore)), copyable };
  const induction = attentions.map((layer) => layer.map((map) => inductionScore(map, ids)));
  if (induction[0][0] !== null) out.induction = induction;
  if (copyable.length) out.accuracy = copyable.filter((i) => predictions[i] === ids[i + 1]).length / copyable.length;
  return out;
}

/** A causal token model (chapter 5) on one sequence, heads switched off by `mask` ([layer][head] 0/1). */
export async function runInduction(model, ids, mask, clock = NO_CLOCK) {
  const feeds = clock.time("feeds", () => feedsFor(model, [ids], null, mask));
  const out = checkFinite(model.id, await runSession(model, feeds, clock));
  return clock.time("read", () => {
    const att = checkMapDims(model, "attentions", out.attentions, [1, ids.length, ids.length]);
    return inductionReadings(attentionsFromOutput(att.data, att.dims, 0, ids.length), out.logits.data, ids);
  });
}

/**
 * A sparse pattern as an (L, L) mask, 1 = blocked (the causal mask is the model's own), as
 * mha_lib.live.reader_pattern_mask: every key; a sliding window of `window` keys, the query included, plus the
 * first `sinks` keys (mha_lib.efficient.sliding_window_mask); or BigBird's blocks of `block` tokens, read from
 * the config's `layouts` (block row r sees block column c where seen[r][c] is 1; torch drew the random blocks).
 * @param {{kind: "full"|"window"|"sparse", window: number, sinks: number, block: number}} pattern
 * @param {number} L
 * @param {{block: number, seen: number[][]}[]} layouts
 * @returns {Uint8Array}  L * L, row-major
 */
export function patternMask(pattern, L, layouts) {
  const mask = new Uint8Array(L * L);
  if (pattern.kind === "full") return mask;
  const layout = layouts.find((x) => x.block === pattern.block);
  if (pattern.kind === "sparse" && !layout) throw new Error(`no block layout for blocks of ${pattern.block}`);
  for (let q = 0; q < L; q++) {
    for (let k = 0; k < L; k++) {
      const seen = pattern.kind === "window"
        ? (k > q - pattern.window || k < pattern.sinks) && k <= q
        : layout.seen[Math.floor(q / pattern.block)][Math.floor(k / pattern.block)] === 1;
      mask[q * L + k] = seen ? 0 : 1;
    }
  }
  return mask;
}

/**
 * Bytes of a decoder's KV cache after L tokens, every layer, float16 (mha_lib.live.pattern_cache_bytes):
 * every key (MHA), what the pattern keeps (a window: its last w keys and its sinks; BigBird: all), GQA with half
 * the key/value heads, MQA, and MLA's latent plus RoPE key.
 */
export function patternCacheBytes(cache, pattern, L) {
  const perHead = 2 * cache.head_dim * 2 * cache.num_layers;
  const kept = pattern.kind === "window" ? Math.min(L, pattern.window + pattern.sinks) : L;
  return { mha: L * cache.num_heads * perHead, pattern: kept * cache.num_heads * perHead,
    gqa: L * Math.floor(cache.num_heads / 2) * perHead, mqa: L * perHead,
    mla: L * (cache.kv_rank + cache.rope_dim) * 2 * cache.num_layers };
}

/**
 * For each copyable position i (copyablePositions), 1 when the key a copy needs -- the one after the first
 * earlier occurrence of the pair (x_i, x_{i+1}) -- is visible to query i under `mask` (1 = blocked), else 0.
 */
export function patternReach(ids, copyable, mask) {
  const L = ids.length;
  const first = new Map();
  for (let j = 0; j + 1 < L; j++) if (!first.has(`${ids[j]},${ids[j + 1]}`)) first.set(`${ids[j]},${ids[j + 1]}`, j);
  return copyable.map((i) => (mask[i * L + first.get(`${ids[i]},${ids[i + 1]}`) + 1] ? 0 : 1));
}

/** A chapter 9 model (its file takes attn_mask) on one sequence under a pattern mask (patternMask). */
export async function runPatterns(model, ids, attnMask, clock = NO_CLOCK) {
  const reach = patternReach(ids, copyablePositions(ids), attnMask); // before the run: the worker takes the buffer
  const feeds = clock.time("feeds", () => feedsFor(model, [ids], null, null, attnMask.slice()));
  const out = checkFinite(model.id, await runSession(model, feeds, clock));
  return clock.time("read", () => {
    const att = checkMapDims(model, "attentions", out.attentions, [1, ids.length, ids.length]);
    return { ...inductionReadings(attentionsFromOutput(att.data, att.dims, 0, ids.length), out.logits.data, ids), reach };
  });
}

/**
 * Per-layer, per-head maps of batch row 0 from a stacked output whose maps need not be square.
 * @param {Float32Array} data  (num_layers, B, H, T, S), row-major
 * @param {number[]} dims
 * @returns {number[][][][]}   [layer][head][T][S]
 */
export function stackedMaps(data, dims) {
  const [numLayers, B, H, T, S] = dims.map(Number);
  if (data.length !== numLayers * B * H * T * S) throw new Error(`maps of dims [${dims}] do not fit ${data.length} values`);
  const out = [];
  for (let l = 0; l < numLayers; l++) {
    const heads = [];
    for (let h = 0; h < H; h++) {
      const base = ((l * B) * H + h) * T * S;
      heads.push(Array.from({ length: T }, (_, t) => Array.from(data.subarray(base + t * S, base + (t + 1) * S))));
    }
    out.push(heads);
  }
  return out;
}

/**
 * What the translate view shows, as mha_lib.live.translation_readings: the greedy tokens, their probabilities,
 * each step's cross-attention, the task's translation and each head's weight on the aligned source word.
 * @param {number[]} words        the source word numbers k (ids k + 3)
 * @param {number[]} tokens       the greedy output ids, up to and with the first EOS
 * @param {Float32Array} logits   (T, C) of the run on BOS and tokens[:-1]
 * @param {number[][][][]} cross  [layer][head][T][S] of that run
 * @param {{bos, eos}} task
 * @param {number[]} dictionary   the id each id translates to
 */
export function translationReadings(words, tokens, logits, cross, task, dictionary) {
  const n = words.length;
  const C = logits.length / tokens.length;
  const confidence = tokens.map((id, t) => {
    const row = logits.subarray(t * C, (t + 1) * C);
    let top = -Infinity;
    for (const x of row) top = Math.max(top, x);
    let sum = 0;
    for (const x of row) sum += Math.exp(x - top);
    return Math.exp(row[id] - top) / sum;
  });
  const steps = Math.min(n, tokens.length); // the steps that predict a word of the translation
  const aligned = cross.map((layer) => layer.map((map) => {
    let s = 0;
    for (let j = 0; j < steps; j++) s += map[j][n - 1 - j];
    return steps ? s / steps : 0;
  }));
  return { source_ids: [...words.map((k) => k + 3), task.eos], tokens, confidence, cross,
    expected: [...words.slice().reverse().map((k) => dictionary[k + 3]), task.eos], aligned };
}

/**
 * Greedy decoding with an exported encoder-decoder (mha_lib.export: src_ids, input_ids, head_mask in; logits and
 * cross_attentions out), as EncoderDecoder.generate: the file runs once per step on BOS and the tokens so far,
 * and the arg-max of its last position is the next token, until EOS or max_words + 1 tokens. The last run read
 * BOS and every token but the last: its cross-attention rows are the steps' (a causal decoder).
 */
export async function runTranslate(model, words, task, dictionary, clock = NO_CLOCK) {
  const { Tensor } = model.ort;
  const src = [...words.map((k) => k + 3), task.eos];
  const feeds = (inputs) => ({
    src_ids: new Tensor("int64", BigInt64Array.from(src, BigInt), [1, src.length]),
    input_ids: new Tensor("int64", BigInt64Array.from(inputs, BigInt), [1, inputs.length]),
    head_mask: headMaskTensor(model, null),
  });
  const tokens = [];
  let out = null;
  for (let t = 0; t <= task.max_words; t++) {
    const inputs = [task.bos, ...tokens];
    out = checkFinite(model.id, await runSession(model, clock.time("feeds", () => feeds(inputs)), clock));
    const C = Number(out.logits.dims[2]);
    const last = out.logits.data.subarray((inputs.length - 1) * C, inputs.length * C);
    let best = 0;
    for (let c = 1; c < C; c++) if (last[c] > last[best]) best = c;
    tokens.push(best);
    if (best === task.eos) break;
  }
  const T = tokens.length;
  const C = Number(out.logits.dims[2]);
  // the last run read [bos, ...tokens without its last]: T positions, one per token
  return clock.time("read", () => {
    const cross = checkMapDims(model, "cross_attentions", out.cross_attentions, [1, T, src.length], { layers: "at most" });
    return translationReadings(words, tokens, out.logits.data.subarray(0, T * C),
      stackedMaps(cross.data, cross.dims), task, dictionary);
  });
}
