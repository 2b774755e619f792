// runtime_browser.mjs -- the default backend: onnxruntime-web in the reader's browser, files from the site.
//
// The models (ONNX files exported by mha_lib.export, listed with their sizes and SHA-256 in
// ../models/manifest.json) are fetched at the reader's first action (fetch_files.mjs: in a worker, checked,
// kept in the Cache API for the next visit) and run by onnxruntime-web (ort_runtime.mjs: vendored in
// ../vendor/onnxruntime-web/, in its own Web Worker, one queue for the page). MiniLM is split by layer
// (mha_lib.export.split_layers_for_web): its first action fetches the runtime, the embeddings and the first
// layer, and each later layer when a run first needs it, so that the first maps are drawn after a few
// megabytes. The runtime and every model are loaded once per page, shared by its views. The views see only
// `browserBackend` (the interface is in view.mjs).

import { WordPieceTokenizer } from "./wordpiece.mjs";
import { onnxMetadata } from "./onnx_file.mjs";
import { checkOwnModel, rowFilesFor } from "./compute.mjs";
import { nextTask } from "./clock.mjs";
import { fetchBytes, fetchJsonFresh } from "./fetch_files.mjs";
import { URLS, chooseProvider, createSession, loadRuntime, loaded, markLoaded, onLoad, providerName, releaseModel,
  runtimeBinary, runtimeRequested, supportsWasmSimd, webgpuHere } from "./ort_runtime.mjs";
import { downloadText, errorText, formatMB, layeredDownloadText, modelsText } from "./text.mjs";
import { t } from "./i18n.mjs";

/** Licence wording of the files the site ships, by licence file (the manifest's `license`), in the page's language. */
const LICENCE_NAMES = {
  "all-MiniLM-L6-v2.LICENSE.txt": () => t("Apache-2.0, converted to ONNX, float16 weights"),
  "mha_lib.LICENSE.txt": () => t("trained for this book"),
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
    const info = manifest?.models ? manifest.models[id] : null;
    const key = info && typeof info.license === "string" ? info.license : "?";
    if (!groups.has(key)) groups.set(key, { ids: [], info });
    groups.get(key).ids.push(id);
  }
  const parts = [];
  for (const [file, { ids, info }] of groups) {
    const name = (info && typeof info.license_name === "string" && (info.license_name === "mha_lib's code, no weights" ? t("mha_lib's code, no weights") : info.license_name))
      || (Object.hasOwn(LICENCE_NAMES, file) ? LICENCE_NAMES[file]() : "");
    parts.push({ label: ids.length > 1 ? t("Models: {ids}", { ids: modelsText(ids) }) : t("Model: {ids}", { ids: modelsText(ids) }),
      detail: name, href: file === "?" ? null : new URL(file, URLS.models).href });
  }
  parts.push({ label: t("Runtime: onnxruntime-web"), detail: "MIT", href: new URL("LICENSE", URLS.ortDir).href });
  return parts;
}

let manifestPromise = null;
let manifestRead = null; // the manifest, once read (licence links)
/**
 * ../models/manifest.json: {models: {id: {file, bytes, sha256, kind, num_layers, num_heads, inputs, outputs, vocab,
 * vocab_sha256, token_rows: {dir, rows, dim, rows_per_file, file_bytes, file_sha256: [one per file]}, license}}};
 * a model split by layer also has `layers`: [{file, bytes, sha256}, one per layer] (its `file` is the embeddings,
 * its `bytes` every part's). Asked of the network once (offline: the copy kept from the last visit); a failed
 * fetch is forgotten, so the next action (or "Try again") asks again.
 */
export function getManifest() {
  if (!manifestPromise) {
    const promise = fetchJsonFresh(`${URLS.models}manifest.json`);
    promise.then((manifest) => {
      manifestRead = manifest;
    }, () => {
      if (manifestPromise === promise) manifestPromise = null;
    });
    manifestPromise = promise;
  }
  return manifestPromise;
}

/** The vocabulary of a model (vocab.txt), checked against the manifest's vocab_sha256 before use. */
async function fetchVocab(info) {
  const bytes = await fetchBytes(URLS.models + info.vocab, { sha256: info.vocab_sha256, name: info.vocab });
  return new TextDecoder("utf-8").decode(bytes);
}

const modelPromises = new Map(); // model id -> Promise<Model>, shared by every view of the page

/** Bytes of a model's first load: its file, or for a model split by layer its embeddings and first maps file. */
function firstBytes(info) {
  if (!info.layers) return info.bytes || 0;
  const rest = info.bytes - info.layers.reduce((s, part) => s + part.bytes, 0); // the embeddings and the first maps
  return info.first_maps ? rest : rest + info.layers[0].bytes; // no first maps file: the first layer itself
}

const DONE = Promise.resolve(null); // a layer's fetch whose bytes became its session

/**
 * The bytes of layer `i`'s file (checked against the manifest), fetched once. Once a run has its word vectors
 * (model.stream(), called by compute_bert.mjs after the embeddings), each layer's arrival starts the next one's
 * fetch: the layers stream one file at a time, in order, after what the first maps need -- the runtime, the
 * embeddings, layer 0 and the text's word vectors -- so that on a slow link nothing else shares it until then.
 */
function layerBytes(model, i, onBytes = () => {}) {
  if (!model.layerFetches[i]) {
    const part = model.info.layers[i];
    const promise = fetchBytes(URLS.models + part.file, { onBytes, sha256: part.sha256, size: part.bytes, name: part.file });
    promise.then(() => {
      if (model.streaming && i + 1 < model.info.layers.length) layerBytes(model, i + 1).catch(() => {}); // ahead of need
    }, () => {
      if (model.layerFetches[i] === promise) model.layerFetches[i] = null; // a later run asks again
    });
    model.layerFetches[i] = promise;
  }
  return model.layerFetches[i];
}

/**
 * Layer `i` of a model split by layer: its session, made once when a run first needs it (made on demand, so that
 * onnxruntime's one queue runs layer i before it compiles layer i + 1). `onWait(i, bytes)` is told when its file
 * has not arrived yet.
 * @param {(layer: number, bytes: number) => void} [onWait]
 */
function layerSession(model, i, onBytes, onWait = () => {}) {
  if (!model.layerPromises[i]) {
    const part = model.info.layers[i];
    if (!model.layerFetches[i]) onWait(i, part.bytes);
    const promise = layerBytes(model, i, onBytes)
      .then((bytes) => {
        model.layerFetches[i] = DONE; // its bytes go to onnxruntime's worker
        return createSession(bytes);
      })
      .then(({ session }) => Object.assign(session, { file: part.file }));
    promise.then(() => {
      promise.ready = true;
    }, () => {
      if (model.layerPromises[i] !== promise) return;
      model.layerPromises[i] = null; // a later run asks again, for the file too
      if (model.layerFetches[i] === DONE) model.layerFetches[i] = null;
    });
    model.layerPromises[i] = promise;
  }
  return model.layerPromises[i];
}

/**
 * Load one model: the runtime, the .onnx file and, for MiniLM, its vocabulary; for a model split by layer, its
 * embeddings and first layer (the other layers when a run first needs them: model.layer(i)).
 * @param {string} id
 * @param {(what: string, bytes: number) => void} onBytes  progress, per file
 * @returns {Promise<{id, info, session, ort, tokenizer, queue, prepare, layer?}>}
 */
function loadModel(id, onBytes) {
  if (!modelPromises.has(id)) {
    const promise = (async () => {
      const manifest = await getManifest();
      const info = manifest.models?.[id];
      if (!info) throw new Error(`the site has no model "${id}" (models/manifest.json)`);
      const runtimeBytes = (n) => onBytes("runtime", n);
      const model = { id, info, tokenizer: null, queue: Promise.resolve(), layerPromises: [], layerFetches: [] };
      const maps = info.layers && info.first_maps; // the first layer's weights alone: drawn before the rest arrives
      const [, bytes, vocab, first] = await Promise.all([
        loadRuntime(runtimeBytes), // fetched beside the model
        fetchBytes(URLS.models + info.file, { onBytes: (n) => onBytes(id, n), sha256: info.sha256, name: info.file,
          size: info.layers ? null : info.bytes }),
        info.vocab ? fetchVocab(info) : null,
        maps ? fetchBytes(URLS.models + maps.file, { onBytes: (n) => onBytes(`${id}:maps`, n), sha256: maps.sha256,
          size: maps.bytes, name: maps.file }).then((b) => createSession(b))
          .then(({ session }) => Object.assign(session, { file: maps.file }))
          : info.layers ? layerSession(model, 0, (n) => onBytes(`${id}:0`, n)) : null, // else the first layer itself
      ]);
      const { session, ort } = await createSession(bytes, runtimeBytes);
      await nextTask(); // the vocabulary's tables are built in a task of their own
      const tokenizer = vocab === null ? null : WordPieceTokenizer.fromVocabText(vocab, { maxLength: info.max_length || 256 });
      Object.assign(model, { session: Object.assign(session, { file: info.file }), ort, tokenizer });
      model.prepare = (ids, onFetch) => fetchTokenRows(model, ids, onFetch); // a split model's word vectors
      if (first) {
        if (maps) model.firstMaps = first;
        model.layer = (i, onWait) => layerSession(model, i, () => {}, onWait);
        model.layerReady = (i) => Boolean(model.layerPromises[i]?.ready);
        model.stream = () => { // the later layers' files, one after another, from the first one not yet asked for
          if (model.streaming) return;
          model.streaming = true;
          const next = model.layerFetches.findIndex((f, i) => !f && !model.layerPromises[i]);
          const from = next < 0 ? model.layerFetches.length : next;
          if (from < model.info.layers.length) layerBytes(model, from).catch(() => {});
        };
      }
      markLoaded(id);
      return model;
    })();
    promise.catch(() => modelPromises.delete(id));
    modelPromises.set(id, promise);
  }
  return modelPromises.get(id);
}

/**
 * A split model (mha_lib.export.split_for_web) keeps its token-embedding table in row files of
 * `rows_per_file` float16 rows (manifest: info.token_rows). Fetch, once each, the files holding the
 * rows of `ids` (and row 0, the padding id), into model.rowFiles: file number -> Uint16Array, each checked
 * against the manifest's digest (fetch_files.mjs: in the download worker, kept for the next visit).
 * runBert calls it inside the model's queue, so two calls never fetch the same file at once.
 * @param {object} model  a Model (view.mjs) with info.token_rows
 * @param {number[][]} ids  token ids, [text][position]
 * @param {(files: number, bytes: number) => void} [onFetch]  told the files and bytes about to be fetched
 */
export async function fetchTokenRows(model, ids, onFetch = () => {}) {
  const spec = model.info.token_rows;
  if (!spec) return;
  model.rowFiles = model.rowFiles || new Map();
  model.rowFetches = model.rowFetches || new Map(); // file number -> its fetch under way (a prefetch and a run share it)
  const missing = rowFilesFor(spec, ids.flat()).filter((k) => !model.rowFiles.has(k));
  const fresh = missing.filter((k) => !model.rowFetches.has(k));
  if (fresh.length) onFetch(fresh.length, fresh.length * spec.file_bytes);
  for (const k of fresh) {
    const name = `${spec.dir}${String(k).padStart(4, "0")}.bin`;
    const rows = Math.min(spec.rows_per_file, spec.rows - k * spec.rows_per_file);
    const promise = (async () => {
      if (!(k >= 0 && rows > 0)) throw new Error(`token id ${k * spec.rows_per_file} is outside the model's ${spec.rows} rows`);
      const bytes = await fetchBytes(URLS.models + name, { sha256: (spec.file_sha256 || [])[k], size: rows * spec.dim * 2, name });
      model.rowFiles.set(k, new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2));
    })();
    promise.catch(() => {}).finally(() => model.rowFetches.delete(k)); // a failed file is asked again next time
    model.rowFetches.set(k, promise);
  }
  await Promise.all(missing.map((k) => model.rowFetches.get(k)).filter(Boolean)); // a failed file rejects every caller
}

/**
 * What a reader's own file must have for a view (mha_lib.export.export_onnx's fixed signatures): exactly
 * these inputs, at least these outputs, and a head_mask of fixed (num_layers, num_heads) shape. `toy`: the
 * toy view's (the refusal says so).
 */
const OWN_CONTRACTS = {
  toy: { inputs: ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"], outputs: ["logits", "attentions"],
    toy: true },
  bert: { inputs: ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"],
    outputs: ["last_hidden_state", "sentence_embedding", "attentions"], toy: false },
};

/**
 * A session for a reader's file, checked against `contract` (one of OWN_CONTRACTS): {session, ort, NL, H}.
 * A file that does not fit is refused, and its session released.
 * @throws {Error} the file is not ONNX, or its inputs, outputs or head_mask do not fit; the message names them
 */
async function openOwnSession(name, bytes, contract) {
  await loadRuntime(() => {}); // its own errors (no WebAssembly SIMD) are not the file's
  let session, ort;
  try {
    ({ session, ort } = await createSession(bytes));
  } catch (err) {
    throw new Error(t("“{name}” could not be read as an ONNX model ({error})", { name, error: errorText(err) }));
  }
  const list = (names) => `[${names.join(", ")}]`;
  const refuse = (message) => {
    releaseModel({ session });
    throw new Error(message);
  };
  const { inputs, outputs } = contract;
  if (session.inputNames.length !== inputs.length || !inputs.every((n) => session.inputNames.includes(n))) {
    const words = { name, got: list(session.inputNames), inputs: list(inputs) };
    refuse(contract.toy ? t("“{name}” has the inputs {got}; the toy view runs models with the inputs {inputs} " +
      "(mha_lib.export.export_onnx of a chapter-1 model)", words)
      : t("“{name}” has the inputs {got}; the sentence view runs models with the inputs {inputs}", words));
  }
  const missing = outputs.filter((n) => !session.outputNames.includes(n));
  if (missing.length) {
    refuse(t("“{name}” has no output {missing} (its outputs: {outputs})",
      { name, missing: list(missing), outputs: list(session.outputNames) }));
  }
  const meta = (session.inputMetadata || []).find((m) => m.name === "head_mask");
  const shape = meta?.shape;
  if (shape?.length !== 2 || !shape.every((d) => Number.isInteger(d) && d >= 1)) {
    refuse(t("“{name}”: its head_mask input has no fixed (num_layers, num_heads) shape (got {shape})",
      { name, shape: JSON.stringify(shape) }));
  }
  return { session, ort, NL: shape[0], H: shape[1] };
}

/**
 * compute.checkOwnModel on a reader's model just opened: the size its head_mask declares within
 * OWN_MODEL_LIMITS, then one run on `ids` whose outputs are finite floats and whose attentions are the
 * layers and heads it declares. A model that fails is released.
 * @throws {Error} naming the file and what does not fit
 */
async function checkedOwnModel(model, ids, types, expect) {
  try {
    await checkOwnModel(model, ids, types, expect);
  } catch (err) {
    releaseModel(model);
    throw err;
  }
  return model;
}

/**
 * A model file the reader picked on their own disk (read by the page, never uploaded), for the toy view:
 * an ONNX file that mha_lib.export.export_onnx wrote from a chapter-1 TokenClassifier. Checked against the
 * toy models' contract (OWN_CONTRACTS.toy: their inputs, a fixed head_mask, the outputs logits and
 * attentions), then (compute.checkOwnModel) its declared size against OWN_MODEL_LIMITS and one run on
 * `sample`, before any view draws it; the view then checks the classes and map size on its sequence.
 * @param {string} name          the file's name: the model's id in the view
 * @param {ArrayBuffer} buffer   the file's bytes
 * @param {{ids: number[], types: number[]}} sample  the sequence of the trial run (the view's)
 * @returns {Promise<{id, info, session, ort, tokenizer: null, queue, prepare}>}  a Model (see view.mjs)
 * @throws {Error} the file is not ONNX, its inputs, outputs or head_mask do not fit, it declares more than
 *   the page draws, or its outputs on `sample` are not finite floats of the declared layers and heads; the
 *   message names them
 */
async function loadOwnModel(name, buffer, sample = { ids: [0, 0, 0], types: [1, 0, 0] }) {
  const { session, ort, NL, H } = await openOwnSession(name, new Uint8Array(buffer), OWN_CONTRACTS.toy);
  const model = { id: name, info: { file: name, kind: "token-classifier", num_layers: NL, num_heads: H,
    inputs: session.inputNames.slice(), outputs: session.outputNames.slice(), own: true },
  session, ort, tokenizer: null, queue: Promise.resolve(), prepare: async () => {} };
  return checkedOwnModel(model, sample.ids, sample.types, OWN_CONTRACTS.toy.outputs);
}

/**
 * A sentence encoder the reader picked on their own disk (read by the page, never uploaded), for the
 * sentence view: an ONNX file that mha_lib.export.export_onnx wrote from a pretrained.BertEncoder whose
 * vocabulary is MiniLM's (the page tokenizes with it): MiniLM fine-tuned or with heads pruned evenly,
 * BERT-base uncased, ... Checked before it runs: the file's mha_lib metadata (kind "bert", vocab_size equal
 * to the tokenizer's), then OWN_CONTRACTS.bert (its inputs, a fixed (num_layers, num_heads) head_mask, its
 * outputs), then (compute.checkOwnModel) its declared size against OWN_MODEL_LIMITS and one run on "[CLS] [SEP]".
 * @param {string} name          the file's name: the model's id in the view
 * @param {ArrayBuffer} buffer   the file's bytes
 * @param {WordPieceTokenizer} tokenizer  MiniLM's (the book's model is loaded first)
 * @returns {Promise<object>}  a Model (see view.mjs) whose tokenizer cuts at the file's max_length
 * @throws {Error} not ONNX, not an mha_lib BertEncoder export, another vocabulary size, a max_length that is
 *   not an integer >= 3, other inputs or outputs, more layers or heads than the page draws, outputs that are not
 *   finite floats of the declared layers and heads; the message names what is wrong
 */
async function loadOwnBert(name, buffer, tokenizer) {
  const bytes = new Uint8Array(buffer);
  let meta;
  try {
    meta = onnxMetadata(bytes);
  } catch (err) {
    throw new Error(t("“{name}” could not be read as an ONNX model ({error})", { name, error: errorText(err) }));
  }
  const kind = meta["mha_lib.kind"];
  if (kind !== "bert") {
    throw new Error(kind ? t("“{name}” is an mha_lib {kind} model; the sentence view runs an export of a " +
      "pretrained.BertEncoder (mha_lib.pretrained.load_bert)", { name, kind })
      : t("“{name}” is not a file that mha_lib.export.export_onnx wrote; the sentence view runs an export of a " +
        "pretrained.BertEncoder (mha_lib.pretrained.load_bert)", { name }));
  }
  const vocab = Number(meta["mha_lib.vocab_size"]);
  if (vocab !== tokenizer.vocab.length) {
    throw new Error(t("“{name}” has a vocabulary of {size} tokens; the page reads text with MiniLM's uncased English " +
      "WordPiece vocabulary of {minilm}, so the model must use that one",
    { name, size: meta["mha_lib.vocab_size"], minilm: tokenizer.vocab.length }));
  }
  const length = meta["mha_lib.max_length"];
  const fileLength = length === undefined ? null : Number(length);
  if (fileLength !== null && !(Number.isInteger(fileLength) && fileLength >= 3)) {
    throw new Error(t("“{name}” says its max_length is “{length}”: a sentence needs at least 3 positions", { name, length }));
  }
  const { session, ort, NL, H } = await openOwnSession(name, bytes, OWN_CONTRACTS.bert);
  const maxLength = Math.min(tokenizer.maxLength, fileLength || tokenizer.maxLength);
  const own = Object.create(tokenizer); // MiniLM's vocabulary and tables, cut at the file's length
  own.maxLength = maxLength;
  const model = { id: name, info: { file: name, kind: "bert", num_layers: NL, num_heads: H, max_length: maxLength,
    inputs: session.inputNames.slice(), outputs: session.outputNames.slice(), own: true },
  session, ort, tokenizer: own, queue: Promise.resolve(), prepare: async () => {} };
  return checkedOwnModel(model, own.encode("").ids, null, OWN_CONTRACTS.bert.outputs);
}

/** Bytes that load() still downloads for `modelIds`: what no view of the page has asked for (a model split by layer:
 * its embeddings and first layer), and the runtime. */
async function bytesToLoad(modelIds) {
  const manifest = await getManifest();
  const models = modelIds.filter((id) => !modelPromises.has(id)).reduce((s, id) => s + firstBytes(manifest.models[id] || {}), 0);
  return models + (runtimeRequested() ? 0 : (await runtimeBinary()).bytes);
}

/** The default backend: onnxruntime-web in the reader's browser, files from the site (see view.mjs). */
export const browserBackend = {
  kind: "browser",
  timesHere: true, // the timing view measures this runtime
  get where() {
    return t("in your browser");
  },
  /** Where `models` run, for the notes, with the execution provider once they are loaded: "in your browser (WebGPU)". */
  whereFor(models) {
    const on = providerName(models);
    return on ? t("in your browser ({provider})", { provider: on }) : t("in your browser");
  },
  providerName,
  /** For the speed table: the provider this page runs on ({ep, why}) and what WebGPU has here ({ok, software, why}). */
  async providers() {
    return { chosen: await chooseProvider(), gpu: await webgpuHere() };
  },
  get who() {
    return t("The model");
  },
  get madeWhen() {
    return t("the book was built");
  },
  get privacy() {
    return t("Typed text never leaves your browser: the model runs on this page.");
  },
  loadModel,
  loadOwnModel,
  loadOwnBert,
  releaseModel,

  /** The "what runs here" line: the browsers that run it, the models and the runtime with their licences. */
  about(modelIds) {
    return { lead: t("Runs in browsers with WebAssembly SIMD (recent Chrome, Edge, Firefox, Safari). "),
      parts: licenceParts(modelIds, manifestRead) };
  },

  /**
   * What the first action downloads, in words, from the manifest (`note(info)` adds a split model's word
   * vectors). A manifest that cannot be read is no error yet: the size is said to be unknown.
   * @throws {Error} the browser cannot run WebAssembly with SIMD
   */
  async firstTimeText(modelIds, note) {
    if (!supportsWasmSimd()) throw new Error(t("this browser cannot run WebAssembly with SIMD"));
    let what = modelIds.length > 1
      ? t("the models and the runtime (their size is unknown: the list of models could not be read)")
      : t("the model and the runtime (their size is unknown: the list of models could not be read)");
    try {
      const manifest = await getManifest();
      const fresh = modelIds.filter((id) => !loaded.has(id)); // another view may have loaded some
      const infos = fresh.map((id) => manifest.models[id] || {});
      const runtime = loaded.has("runtime") ? 0 : (await runtimeBinary()).bytes;
      const layered = infos.length === 1 && infos[0].layers;
      what = layered ? layeredDownloadText(firstBytes(infos[0]), infos[0].bytes - firstBytes(infos[0]), runtime)
        : downloadText(fresh.length, infos.reduce((sum, info) => sum + (info.bytes || 0), 0), runtime);
      const split = infos.find((m) => m.token_rows);
      if (split) what += note(split);
    } catch (err) {
      console.warn("mha_live: the download size is unknown:", err);
    }
    return what ? t("The first time, your browser downloads {what}; it keeps them.", { what })
      : t("Everything it needs is already loaded.");
  },

  /** Load every model of a view, telling `show.start(totalBytes, text)` and `show.bytes(got, total, text)`. */
  load(modelIds, show) {
    return bytesToLoad(modelIds).then((all) => {
      const many = modelIds.length > 1;
      const what = runtimeRequested() ? (many ? t("the models") : t("the model"))
        : many ? t("the models and the runtime") : t("the model and the runtime");
      const downloading = (got, total) => t("Downloading {what}: {got} of {total}…", { what, got, total });
      show.start(all, all ? downloading("0", formatMB(all)) : t("Preparing the model…"));
      const received = {}; // file -> bytes so far
      const onBytes = (file, n) => {
        received[file] = n;
        const got = Object.values(received).reduce((a, b) => a + b, 0);
        const total = Math.max(all, got);
        show.bytes(got, total, downloading(formatMB(got), formatMB(total)));
      };
      return Promise.all(modelIds.map((id) => loadModel(id, onBytes)));
    });
  },

  loadedText(modelIds, seconds) {
    return modelIds.length > 1 ? t("The models run in your browser (loaded in {seconds} s).", { seconds: seconds.toFixed(1) })
      : t("The model runs in your browser (loaded in {seconds} s).", { seconds: seconds.toFixed(1) });
  },

  loadFailedText(message) {
    return t("The live model could not be loaded ({message}).", { message });
  },

  /** `listener()` when any view of the page loads the runtime or a model (what is left to download changes). */
  onLoaded(listener) {
    onLoad(listener);
  },
};
