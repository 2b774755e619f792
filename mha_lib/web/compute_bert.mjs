// compute_bert.mjs -- a sentence encoder (MiniLM, or the reader's own) on texts, one layer at a time where the
// model is split by layer (mha_lib.export.split_layers_for_web), and chapter 4's scores of its embeddings.
//
// A model split by layer (the browser's MiniLM: model.layer(i) gives layer i's session, fetched when first
// asked) runs its embeddings file, then each layer's file: the maps of layer l reach the view as soon as layer l
// is computed (onLayer), so the first maps are drawn after the runtime, the embeddings and one layer. Texts run
// in groups of near lengths (lengthGroups: chapter 4's 24 texts as two batches, not one padded to the longest).
// It keeps the hidden states of its last batches (model.states): a run of the same texts whose head mask first
// differs at layer l starts from layer l's input (a head toggled in layer 4 recomputes layers 4 and 5), and the
// maps of the layers before are the kept ones. A whole file (the kernel's MiniLM, the reader's own model) runs
// once, then gives its layers one by one.

import { NO_CLOCK } from "./clock.mjs";
import { attentionsFromOutput, checkFinite, checkMapDims, feedsFor, queued } from "./compute.mjs";

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

// Batches whose hidden states a model keeps (the sentence's, and each length group of the scores' texts: see
// lengthGroups); a toggle finds them all kept, so it recomputes only the layers from the one it changed.
const KEPT_STATES = 8;

// A run's fixed cost in padded positions (one text's layer call each): the worker's round trip and the run's own
// setup, about 1.5 ms a call on this book's machine (benchmarks/bench_live.py: a 15-token layer call 2.8-3 ms in the
// page, native onnxruntime 0.7 ms), where one position of a layer costs about 0.1 ms in the page.
export const CALL_POSITIONS = 16;

/**
 * The texts in groups of near lengths, each group run as one (B, L) batch: the fewest padded positions plus
 * CALL_POSITIONS a group (a sentence-transformer's texts are short and of few lengths: chapter 4's 24 texts
 * of 10-16 tokens are 384 positions as one batch, 327 in two). Exact dynamic programming over the texts
 * sorted by length. Deterministic: equal lengths keep their order.
 * @param {number[]} lengths  each text's tokens (>= 1)
 * @param {number} [callPositions]  a group's fixed cost, in positions
 * @returns {number[][]}  groups of indices into `lengths`, the shortest group first; every index once
 */
export function lengthGroups(lengths, callPositions = CALL_POSITIONS) {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a] - lengths[b] || a - b);
  const n = order.length;
  const best = [0]; // best[j]: the least cost of the j shortest texts
  const cut = [0]; // where the last group of the best[j] starts
  for (let j = 1; j <= n; j++) {
    best[j] = Infinity;
    for (let i = 0; i < j; i++) {
      const cost = best[i] + (j - i) * lengths[order[j - 1]] + callPositions; // texts i..j-1, padded to the longest
      if (cost < best[j]) [best[j], cut[j]] = [cost, i];
    }
  }
  const groups = [];
  for (let j = n; j > 0; j = cut[j]) groups.unshift(order.slice(cut[j], j));
  return groups;
}

/** The head mask's rows as Float32Arrays of H, 1 = on; every head on where `mask` is null. */
function maskRows(mask, NL, H) {
  return Array.from({ length: NL }, (_, l) => Float32Array.from({ length: H }, (_, h) => (mask && !mask[l][h] ? 0 : 1)));
}

const sameRow = (a, b) => a && b && a.length === b.length && a.every((x, i) => x === b[i]);

/** (B, L) token ids and the padding of `encodings`: flat int64 ids, bool padding (1 = padding), B, L. */
function idGrid(ids) {
  const B = ids.length;
  const L = Math.max(...ids.map((r) => r.length));
  const padding = new Uint8Array(B * L).fill(1);
  ids.forEach((row, b) => row.forEach((_, i) => { padding[b * L + i] = 0; }));
  return { B, L, padding };
}

/**
 * One layer's `attentions` output (B, H, L, L) as a stack of one layer (1, B, H, L, L), checked (checkMapDims)
 * against the heads the model declares and the (B, L) ids the page ran.
 */
function layerMaps(model, tensor, B, L) {
  const dims = tensor?.dims ? [1, ...Array.from(tensor.dims, Number)] : null;
  return checkMapDims(model, "attentions", { data: tensor?.data, dims }, [B, L, L], { layers: "at most" });
}

/**
 * Run a model split by layer on (B, L) ids, from the first layer whose head-mask row differs from the kept state's.
 * Inside the model's queue. Returns the state ({hidden, masks, maps, emb, d, upTo}), or null once `stale()` says
 * a newer run waits (the layers computed so far are kept).
 */
async function runLayers(model, ids, mask, { onFetch, onLayer, maps, clock, stale, onWait }) {
  const { num_layers: NL, num_heads: H } = model.info;
  const { B, L, padding } = idGrid(ids);
  const key = `${B}x${L}:${ids.map((r) => r.join(",")).join(";")}`;
  model.states = model.states || new Map();
  let state = model.states.get(key);
  if (state) model.states.delete(key); // kept as the most recent (the Map's order is the age)
  const rows = maskRows(mask, NL, H);
  const { Tensor } = model.ort;
  if (!state) {
    await clock.timeAsync("feeds", () => model.prepare(ids, onFetch)); // the word vectors of these tokens
    const feeds = clock.time("feeds", () => feedsFor(model, ids, null, null));
    const out = checkFinite(model.id, await clock.run(model.session, feeds));
    const h = out.hidden;
    state = { hidden: [h.data], masks: [], maps: [], emb: null, d: Number(h.dims[2]), upTo: 0 };
  }
  if (model.stream) model.stream(); // the later layers' files may come now: the word vectors are in
  model.states.set(key, state);
  while (model.states.size > KEPT_STATES) model.states.delete(model.states.keys().next().value);
  let from = 0;
  while (from < state.upTo && sameRow(rows[from], state.masks[from]) && (!maps || state.maps[from])) from += 1;
  for (let l = 0; l < Math.min(from, NL); l++) if (maps) onLayer(l, state.maps[l]); // unchanged: the kept maps
  const n = ids[0].length;
  state.upTo = from; // the layers from here on are recomputed: until each is, the kept ones are no longer valid
  let drawn = -1; // a layer whose maps were given already (the first maps file, while layer 0 is still arriving)
  if (from === 0 && maps && model.firstMaps && !model.layerReady(0)) {
    const feeds = clock.time("feeds", () => ({ hidden: new Tensor("float32", state.hidden[0].slice(), [B, L, state.d]),
      key_padding_mask: new Tensor("bool", padding.slice(), [B, L]) }));
    const att = layerMaps(model, checkFinite(model.id, await clock.run(model.firstMaps, feeds)).attentions, B, L);
    onLayer(0, clock.time("read", () => attentionsFromOutput(att.data, att.dims, 0, n)[0]));
    drawn = 0;
  }
  for (let l = from; l < NL; l++) {
    if (stale()) return null;
    const session = await clock.timeAsync("load", () => model.layer(l, onWait)); // fetched when first needed
    const last = l === NL - 1;
    const feeds = clock.time("feeds", () => ({
      hidden: new Tensor("float32", state.hidden[l].slice(), [B, L, state.d]), // a copy: the worker takes its buffer
      key_padding_mask: new Tensor("bool", padding.slice(), [B, L]),
      head_mask: new Tensor("float32", rows[l].slice(), [H]),
    }));
    const fetches = ["hidden_out", ...(maps ? ["attentions"] : []), ...(last ? ["sentence_embedding"] : [])];
    const out = checkFinite(model.id, await clock.run(session, feeds, fetches));
    state.hidden[l + 1] = out.hidden_out.data;
    state.masks[l] = rows[l];
    if (last) state.emb = out.sentence_embedding.data;
    if (maps) {
      const att = layerMaps(model, out.attentions, B, L); // text 0's maps
      state.maps[l] = clock.time("read", () => attentionsFromOutput(att.data, att.dims, 0, n)[0]);
    } else {
      state.maps[l] = null;
    }
    state.upTo = l + 1;
    if (maps && l !== drawn) onLayer(l, state.maps[l]);
  }
  return state;
}

/**
 * The input of every layer for one sequence, from a model split by layer (issue 49's MiniLM): the hidden states
 * its layer files take, as the file of an unsplit model gives them (`layer_inputs`, chapter 2's steps view).
 * @param {object} model  a Model split by layer (model.layer)
 * @param {number[]} ids  one sequence's token ids
 * @param {Function} [onFetch]  onFetch(files, bytes): word vectors being fetched
 * @returns {Promise<{data: Float32Array, dims: number[]}>}  dims [num_layers, 1, L, d_model]
 */
export async function layerInputsOf(model, ids, onFetch = () => {}) {
  const state = await queued(model, () => runLayers(model, [ids], null, { onFetch, onLayer: () => {}, maps: false,
    clock: NO_CLOCK, stale: () => false, onWait: () => {} }));
  const { num_layers: NL } = model.info;
  const size = ids.length * state.d;
  const data = new Float32Array(NL * size);
  for (let l = 0; l < NL; l++) data.set(state.hidden[l].subarray(0, size), l * size); // hidden (1, L, d), float32
  return { data, dims: [NL, 1, ids.length, state.d] };
}

/**
 * A sentence encoder on texts: their tokens, the maps of text 0 and the sentence embeddings of all.
 * @param {object} model      a Model (view.mjs); split by layer where it has model.layer
 * @param {string[]} texts
 * @param {number[][]|null} mask  [layer][head] 1 = on; null: every head on
 * @param {object} [options]  onFetch(files, bytes): word vectors being fetched; onLayer(l, maps): layer l's maps of
 *   text 0 ([head][query][key]), as soon as they are computed; maps: false computes the embeddings only (no maps
 *   read); clock: a Clock (clock.mjs); stale(): true once a newer run waits (a split model stops between layers);
 *   onWait(layer, bytes): a layer's file is being fetched; onTokens(encodings): the texts are tokenized (before any
 *   layer)
 * @returns {Promise<{encodings, attentions: number[][][][]|null, embeddings: Float32Array|null, d: number}|null>}
 *   attentions: [layer][head][q][k] of text 0 (null: maps false); embeddings: (N, d); null: stopped for a newer run
 */
export async function runBert(model, texts, mask, { onFetch = () => {}, onLayer = () => {}, maps = true, clock = NO_CLOCK,
  stale = () => false, onWait = () => {}, onTokens = () => {} } = {}) {
  const encodings = clock.time("feeds", () => texts.map((t) => model.tokenizer.encode(t)));
  onTokens(encodings);
  const ids = encodings.map((e) => e.ids);
  if (model.layer) {
    // texts of near lengths together (lengthGroups), text 0's group first: its maps are drawn as they come
    const groups = lengthGroups(ids.map((r) => r.length));
    const withText0 = groups.findIndex((g) => g.includes(0));
    groups.unshift([0, ...groups.splice(withText0, 1)[0].filter((i) => i !== 0)]); // maps: its row 0
    return queued(model, async () => {
      let embeddings = null;
      let first = null;
      for (const group of groups) {
        const withMaps = maps && group === groups[0];
        const state = await runLayers(model, group.map((i) => ids[i]), mask, { onFetch, onLayer, maps: withMaps, clock,
          stale, onWait });
        if (!state) return null;
        first = first || state;
        embeddings = embeddings || new Float32Array(ids.length * state.d); // (N, d), the texts' order
        group.forEach((i, b) => embeddings.set(state.emb.subarray(b * state.d, (b + 1) * state.d), i * state.d));
      }
      return { encodings, attentions: maps ? first.maps.slice() : null, embeddings, d: first.d };
    });
  }
  const out = await queued(model, async () => {
    await clock.timeAsync("feeds", () => model.prepare(ids, onFetch)); // a split model: the word vectors, in the queue
    const feeds = clock.time("feeds", () => feedsFor(model, ids, null, mask));
    return checkFinite(model.id, await clock.run(model.session, feeds));
  });
  const L = Math.max(...ids.map((row) => row.length));
  const att = checkMapDims(model, "attentions", out.attentions, [ids.length, L, L]);
  const emb = out.sentence_embedding;
  const attentions = maps ? clock.time("read", () => attentionsFromOutput(att.data, att.dims, 0, encodings[0].ids.length)) : null;
  if (attentions) attentions.forEach((layer, l) => onLayer(l, layer));
  return { encodings, attentions, embeddings: emb ? emb.data : null, d: emb ? Number(emb.dims[1]) : 0 };
}
