// steps.mjs -- one head, step by step (the "steps" view, chapter 2), without the DOM: the stages of a head of a
// layer, read from the layer's steps file (mha_lib.export.export_attention_steps: `<model>.attn<l>.onnx`) run on the
// layer's input, which the model's file gives as `layer_inputs` (mha_lib.export.export_onnx(..., layer_inputs=True)).
//
// Data shapes: a stage is a [row][column] matrix; one head's stages (headStages, as mha_lib.live.steps_readings):
//   x (L, d_model), q, k, v (L, d_k), scores = Q K^T and scaled = Q K^T / sqrt(d_k) (L, L), blocked (L, L) 0/1,
//   weights (L, L), head_out (L, d_k), concat (L, H d_k), contribution = head_h W^O_h (L, d_model), out (L, d_model).
// The step control's steps (STEPS) each show some of them (stepMatrices).

import { checkFinite, feedsFor, floatNumbers, queued } from "./compute.mjs";
import { layerInputsOf } from "./compute_bert.mjs";
import { t } from "./i18n.mjs";

/** A head's stages, in the order of the computation (mha_lib.live.steps.HEAD_STAGES). */
export const HEAD_STAGES = ["x", "q", "k", "v", "scores", "scaled", "blocked", "weights", "head_out", "concat",
  "contribution", "out"];

/** The steps file's outputs (mha_lib.analysis.STAGES): every head at once. */
export const FILE_STAGES = ["x", "q", "k", "v", "scores", "scaled", "blocked", "weights", "head_out", "concat",
  "contributions", "out"];

/** The steps of the view's step control, in order: an id and the chip's short label (not translated: math). */
export const STEPS = [
  { id: "input", chip: "X" },
  { id: "project", chip: "Q, K, V" },
  { id: "scores", chip: "Q·Kᵀ" },
  { id: "scale", chip: "÷ √d_k" },
  { id: "mask", chip: "+ mask" },
  { id: "softmax", chip: "softmax" },
  { id: "values", chip: "· V" },
  { id: "concat", chip: "concat" },
  { id: "output", chip: "· W^O" },
];

/** The id of layer `layer`'s steps file of `model` (mha_lib.live.steps_id). */
export function stepsId(model, layer) {
  return `${model}.attn${layer}`;
}

/** (L, L) causal mask, row-major, 1 = blocked (a key after its query). */
export function causalMask(L, causal) {
  const mask = new Uint8Array(L * L);
  if (causal) for (let q = 0; q < L; q++) for (let k = q + 1; k < L; k++) mask[q * L + k] = 1;
  return mask;
}

/** Rows `[row][column]` of a row-major block of `data` starting at `base`. */
function rowsOf(data, base, rows, cols) {
  return Array.from({ length: rows }, (_, r) => Array.from(data.subarray(base + r * cols, base + (r + 1) * cols)));
}

/** The (1, L, L) or (1, 1, L, L) or (1, H, L, L) `blocked` output as [q][k] 0/1 for head h (bool or float data). */
function blockedOf(tensor, h, L) {
  const data = tensor.data;
  const heads = Math.max(1, data.length / (L * L));
  const base = (heads > 1 ? h : 0) * L * L;
  return Array.from({ length: L }, (_, q) => Array.from({ length: L }, (_, k) => (Number(data[base + q * L + k]) ? 1 : 0)));
}

/**
 * One head's stages from the steps file's outputs (batch row 0), as mha_lib.live.steps_readings gives them.
 * @param {Object<string, {dims, data}>} out  the outputs, checked (checkFinite)
 * @param {number} h  the head
 * @returns {Object<string, number[][]>}  HEAD_STAGES
 */
export function headStages(out, h) {
  for (const name of FILE_STAGES) if (!out[name]) throw new Error(`the steps file gave no ${name}`);
  const [, H, L, hd] = out.q.dims.map(Number);
  const d = Number(out.x.dims[2]);
  const width = Number(out.concat.dims[2]);
  if (!(h >= 0 && h < H)) throw new Error(`head ${h} is not one of the layer's ${H} heads`);
  const num = (name) => floatNumbers(out[name]) || out[name].data;
  const perHead = (name, cols) => rowsOf(num(name), h * L * cols, L, cols);
  return {
    x: rowsOf(num("x"), 0, L, d), q: perHead("q", hd), k: perHead("k", hd), v: perHead("v", hd),
    scores: perHead("scores", L), scaled: perHead("scaled", L), blocked: blockedOf(out.blocked, h, L),
    weights: perHead("weights", L), head_out: perHead("head_out", hd), concat: rowsOf(num("concat"), 0, L, width),
    contribution: perHead("contributions", d), out: rowsOf(num("out"), 0, L, d),
  };
}

/**
 * The model's input of every layer for one sequence: its file's `layer_inputs` (num_layers, 1, L, d_model).
 * A model split by layer (issue 49's MiniLM) gives them as the hidden states its layer files take (layerInputsOf).
 * @returns {Promise<{data: Float32Array, dims: number[]}>}
 */
export async function runLayerInputs(model, ids, types, onFetch = () => {}) {
  if (model.layer) return layerInputsOf(model, ids, onFetch); // split by layer: the hidden states its files take
  const out = await queued(model, async () => {
    await model.prepare([ids], onFetch); // a split model: the word vectors of these tokens
    return checkFinite(model.id, await model.session.run(feedsFor(model, [ids], types ? [types] : null, null)));
  });
  const li = out.layer_inputs;
  const dims = li?.dims ? Array.from(li.dims, Number) : null;
  if (dims?.length !== 4 || dims[0] !== model.info.num_layers || dims[1] !== 1 || dims[2] !== ids.length) {
    throw new Error(t("the model {model} returned no layer inputs of dims [{layers}, 1, {tokens}, d_model] (got {dims})",
      { model: model.id, layers: model.info.num_layers, tokens: ids.length, dims: dims ? dims.join(",") : "none" }));
  }
  return { data: floatNumbers(li) || li.data, dims };
}

/**
 * Every stage of layer `layer` (all heads) on the layer's input: the steps file run on `hidden` ((L, d_model), of
 * runLayerInputs) with the mask (causal or none).
 * @returns {Promise<Object<string, {dims, data}>>}  the outputs, checked
 */
export async function runStepsFile(stepsModel, hidden, L, d, causal) {
  const { Tensor } = stepsModel.ort;
  const out = await queued(stepsModel, async () => checkFinite(stepsModel.id, await stepsModel.session.run({
    hidden: new Tensor("float32", Float32Array.from(hidden), [1, L, d]),
    attn_mask: new Tensor("bool", causalMask(L, causal), [L, L]),
  })));
  const q = out.q?.dims ? Array.from(out.q.dims, Number) : null;
  if (q?.length !== 4 || q[0] !== 1 || q[2] !== L) {
    throw new Error(`the steps file ${stepsModel.id} returned q of dims [${q}], not [1, H, ${L}, d_k]`);
  }
  return out;
}

/** The transpose of a [row][column] matrix. */
export function transpose(m) {
  return m.length ? m[0].map((_, c) => m.map((row) => row[c])) : [];
}

/** The largest |value| of the finite cells of matrices (1 when none): one colour scale for a step's matrices. */
export function sharedScale(...matrices) {
  let top = 0;
  for (const m of matrices) for (const row of m) for (const v of row) if (Number.isFinite(v) && Math.abs(v) > top) top = Math.abs(v);
  return top > 0 ? top : 1;
}

/**
 * The matrices a step shows, with their names and axes: [{key, name, rows, cols, values, signed, vmax, blocked?,
 * band?}] where rows/cols say what the axes are ("tokens" or a count of features), band marks head h's columns
 * (concat) or rows (W^O), and `op` between two matrices is the operation's symbol.
 * @param {string} step   an id of STEPS
 * @param {Object<string, number[][]>} s  one head's stages (headStages)
 * @param {{head: number, d_k: number, num_heads: number, d_model: number}} sizes
 */
export function stepMatrices(step, s, { head, d_k: dk, num_heads: H, d_model: d }) {
  const L = s.q.length;
  const mat = (key, name, values, more = {}) => ({ key, name, values, rows: "tokens",
    cols: values[0] ? values[0].length : 0, signed: true, ...more });
  const masked = s.scaled.map((row, q) => row.map((v, k) => (s.blocked[q][k] ? -Infinity : v)));
  const qkv = sharedScale(s.q, s.k, s.v);
  const scores = sharedScale(s.scores);
  const scaled = sharedScale(s.scaled);
  const wide = sharedScale(s.contribution, s.out);
  const band = { from: head * dk, to: (head + 1) * dk };
  const R = { result: true }; // the step's outcome: drawn row by row when the step opens (unless motion is reduced)
  const steps = {
    input: [mat("x", "X", s.x, R)],
    project: [mat("q", "Q", s.q, { vmax: qkv, ...R }), mat("k", "K", s.k, { vmax: qkv, ...R }),
      mat("v", "V", s.v, { vmax: qkv, ...R })],
    scores: [mat("q", "Q", s.q, { vmax: qkv, op: "·" }), { ...mat("kT", "Kᵀ", transpose(s.k), { vmax: qkv }), rows: dk,
      colsAre: "tokens", op: "=" }, mat("scores", "S = Q Kᵀ", s.scores, { colsAre: "tokens", vmax: scores, ...R })],
    scale: [mat("scores", "S", s.scores, { colsAre: "tokens", vmax: scores, op: `÷ √${dk} =` }),
      mat("scaled", "S / √d_k", s.scaled, { colsAre: "tokens", vmax: scaled, ...R })],
    mask: [mat("masked", "S / √d_k + M", masked, { colsAre: "tokens", vmax: scaled, blocked: s.blocked, ...R })],
    softmax: [mat("weights", "A = softmax(S / √d_k + M)", s.weights, { colsAre: "tokens", signed: false, vmax: 1, ...R })],
    values: [mat("weights", "A", s.weights, { colsAre: "tokens", signed: false, vmax: 1, op: "·" }),
      mat("v", "V", s.v, { vmax: qkv, op: "=" }), mat("head_out", `head${head} = A V`, s.head_out, { vmax: qkv, ...R })],
    concat: [mat("concat", `Concat(head0 … head${H - 1})`, s.concat, { band, ...R })],
    output: [mat("concat", "Concat", s.concat, { band, op: "·" }),
      { key: "w_o", name: "W^O", placeholder: true, rows: H * dk, cols: d, band, op: "+ b^O =" },
      mat("out", "output", s.out, { vmax: wide, ...R }),
      mat("contribution", `head${head} W^O_${head}`, s.contribution, { vmax: wide, ...R })],
  };
  if (!steps[step]) throw new Error(`no step ${step}`);
  return steps[step].map((m) => ({ ...m, vmax: m.vmax || sharedScale(m.values || [[1]]), L }));
}

/**
 * Every stage of one head as an export figure (figure.mjs): a matrix per stage, signed colours, the masked scores
 * grey where blocked, columns named by token or feature.
 * @returns {{name, title, heads, vmax, columns, data}}
 */
export function stepsFigure({ model, layer, head, causal, input, tokens, stages, source, sizes }) {
  const dims = (n) => Array.from({ length: n }, (_, i) => String(i));
  const L = tokens.length;
  const entry = (label, map, cols, more = {}) => ({ label: `${label} (${map.length}×${map[0].length})`, tokens,
    keyTokens: cols, map, off: false, signed: true, vmax: sharedScale(map), ...more });
  const masked = stages.scaled.map((row, q) => row.map((v, k) => (stages.blocked[q][k] ? -Infinity : v)));
  const heads = [
    entry("X", stages.x, dims(sizes.d_model)), entry("Q", stages.q, dims(sizes.d_k)), entry("K", stages.k, dims(sizes.d_k)),
    entry("V", stages.v, dims(sizes.d_k)), entry("QK^T", stages.scores, tokens), entry("QK^T/sqrt(d_k)", stages.scaled, tokens),
    entry("+M", masked, tokens, { blocked: stages.blocked, vmax: sharedScale(stages.scaled) }),
    entry("softmax", stages.weights, tokens, { signed: false, vmax: 1 }), entry(`head${head}`, stages.head_out, dims(sizes.d_k)),
    entry("Concat", stages.concat, dims(stages.concat[0].length)),
    entry(`head${head} W^O_${head}`, stages.contribution, dims(sizes.d_model)), entry("output", stages.out, dims(sizes.d_model)),
  ];
  const title = [t("{model}: layer {layer}, head {head}, step by step ({count} tokens)", { model, layer, head, count: L }),
    t("Input: “{input}”", { input: String(input).slice(0, 120) }),
    causal ? t("Causal mask; blue negative, red positive, grey blocked; softmax 0 to 1.")
      : t("No mask; blue negative, red positive; softmax 0 to 1.")];
  return { name: [model, `L${layer}`, `H${head}`, "steps"], title, heads, vmax: 1,
    columns: ["stage", "off", "row", "column", "row_token", "column_label", "value"],
    data: { view: "steps", model, layer, head, causal, text: input, tokens, source,
      stages: Object.fromEntries(HEAD_STAGES.map((k) => [k, stages[k]])) } };
}

/**
 * A toy sequence as the reader writes it: tokens 0..V-1 separated by spaces (or commas), the marked one with a
 * star ("3 *5 1 0"), 1 to `most` of them.
 * @returns {{ids: number[], types: number[]}}
 * @throws {Error} naming the offending token ("token 2 is “9”, not a number in 0..7"), or the count of marks
 */
export function parseMarked(text, V, most) {
  const words = String(text).split(/[\s,]+/).filter((w) => w);
  if (words.length < 1 || words.length > most) {
    throw new Error(t("the sequence has {count} tokens; give 1 to {most}", { count: words.length, most }));
  }
  const ids = [];
  const types = [];
  words.forEach((word, i) => {
    const marked = word.startsWith("*");
    const body = marked ? word.slice(1) : word;
    if (!/^\d+$/.test(body) || Number(body) >= V) {
      throw new Error(t("token {i} is “{token}”, not a number in 0..{last} (a star marks x_m)", { i, token: word, last: V - 1 }));
    }
    ids.push(Number(body));
    types.push(marked ? 1 : 0);
  });
  const marks = types.filter((x) => x).length;
  if (marks !== 1) throw new Error(t("{count} tokens are marked with a star; mark exactly one", { count: marks }));
  return { ids, types };
}

/** The toy sequence written back: "3 *5 1 0". */
export function markedText(ids, types) {
  return ids.map((id, i) => (types[i] ? `*${id}` : String(id))).join(" ");
}

/**
 * What run() of the steps view takes: a text (MiniLM) or a toy sequence as text ("3 *5 1") or {ids, types}, alone or
 * in {text | ids, types, layer, head, causal} (what is left out stays as it is).
 * @param {*} input
 * @param {{kind, num_layers, num_heads, max_tokens, task?}} config
 * @param {{text?, ids?, types?, layer, head, causal}} now  the view's current state
 * @returns {{text?: string, ids?: number[], types?: number[], layer: number, head: number, causal: boolean}}
 * @throws {Error} naming the offending value
 */
export function checkStepsInput(input, config, now) {
  const fail = (what) => {
    throw new Error(`run(): ${what}`);
  };
  const object = input && typeof input === "object" && !Array.isArray(input) ? input : null;
  if (object === null && typeof input !== "string") {
    fail(`takes a text, or {${config.kind === "bert" ? "text" : "ids, types"}, layer, head, causal}, got ` +
      `${input === null ? "null" : Array.isArray(input) ? "a list" : typeof input}`);
  }
  const allowed = ["text", "ids", "types", "layer", "head", "causal"];
  const extra = object ? Object.keys(object).filter((k) => !allowed.includes(k)) : [];
  if (extra.length) fail(`unknown key ${JSON.stringify(extra[0])}; it takes ${allowed.join(", ")}`);
  const int = (name, below) => {
    const v = object[name];
    if (!Number.isInteger(v) || v < 0 || v >= below) fail(`${name} must be an integer in 0..${below - 1}, got ${JSON.stringify(v)}`);
    return v;
  };
  const out = { layer: now.layer, head: now.head, causal: now.causal };
  if (object && "layer" in object) out.layer = int("layer", config.num_layers);
  if (object && "head" in object) out.head = int("head", config.num_heads);
  if (object && "causal" in object) {
    if (typeof object.causal !== "boolean") fail(`causal must be true or false, got ${JSON.stringify(object.causal)}`);
    out.causal = object.causal;
  }
  const text = typeof input === "string" ? input : object.text;
  if (config.kind === "bert") {
    if (object && ("ids" in object || "types" in object)) fail("MiniLM reads a text: give {text}, not ids");
    if (text === undefined) out.text = now.text;
    else if (typeof text !== "string") fail(`text must be a string, got ${typeof text}`);
    else out.text = text;
    return out;
  }
  const { vocab_size: V } = config.task;
  if (typeof text === "string") {
    Object.assign(out, parseMarked(text, V, config.max_tokens));
  } else if (object && ("ids" in object || "types" in object)) {
    const { ids, types } = object;
    if (!Array.isArray(ids) || ids.length < 1 || ids.length > config.max_tokens) {
      fail(`ids must be a list of 1 to ${config.max_tokens} tokens, got ${Array.isArray(ids) ? `${ids.length} tokens` : typeof ids}`);
    }
    if (!Array.isArray(types) || types.length !== ids.length) fail(`types must be a list of ${ids.length} values 0/1`);
    ids.forEach((v, i) => {
      if (!Number.isInteger(v) || v < 0 || v >= V) fail(`ids[${i}] = ${JSON.stringify(v)} is not a token in 0..${V - 1}`);
    });
    types.forEach((v, i) => {
      if (v !== 0 && v !== 1) fail(`types[${i}] = ${JSON.stringify(v)} is not 0 or 1`);
    });
    if (types.filter((v) => v === 1).length !== 1) fail("types must mark exactly one position with 1");
    out.ids = ids.slice();
    out.types = types.slice();
  } else {
    out.ids = now.ids;
    out.types = now.types;
  }
  return out;
}
