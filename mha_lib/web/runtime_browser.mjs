// runtime_browser.mjs -- the default backend: onnxruntime-web in the reader's browser, files from the site.
//
// The model (an ONNX file exported by mha_lib.export, listed with its size in ../models/manifest.json)
// is fetched at the reader's first action and run by onnxruntime-web's WebAssembly backend (vendored
// in ../vendor/onnxruntime-web/), one thread, inside onnxruntime-web's Web Worker (env.wasm.proxy), so
// that the page keeps answering while a model compiles or runs. The runtime and every model are loaded
// once per page, shared by its views. The views see only `browserBackend` (the interface is in view.mjs).

import { WordPieceTokenizer } from "./wordpiece.mjs";
import { checkDigest } from "./integrity.mjs";
import { rowFilesFor } from "./compute.mjs";
import { downloadText, errorText, formatMB, modelsText } from "./text.mjs";

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
/** Licence wording of the files the site ships, by licence file (the manifest's `license`). */
const LICENCE_NAMES = {
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
    parts.push({ label: `${ids.length > 1 ? "Models" : "Model"}: ${modelsText(ids)}`, detail: name,
      href: file === "?" ? null : new URL(file, URLS.models).href });
  }
  parts.push({ label: "Runtime: onnxruntime-web", detail: "MIT", href: new URL("LICENSE", URLS.ortDir).href });
  return parts;
}

// The smallest WebAssembly module that uses a SIMD instruction (wasm-feature-detect's probe).
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0,
  65, 0, 253, 15, 253, 98, 11]);

/** Can this browser run onnxruntime-web's WebAssembly backend (WebAssembly with SIMD)? */
function supportsWasmSimd() {
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
  // joined by the browser (a Blob), not by a loop on the page's thread: the model is 22 MB
  return new Uint8Array(await new Blob(chunks).arrayBuffer());
}

let manifestPromise = null;
let manifestRead = null; // the manifest, once read (licence links)
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
    promise.then((manifest) => {
      manifestRead = manifest;
    }, () => {
      if (manifestPromise === promise) manifestPromise = null;
    });
    manifestPromise = promise;
  }
  return manifestPromise;
}

let runtimeBytes = null; // size of the WebAssembly runtime, from a HEAD request
/** Size in bytes of the WebAssembly file (a HEAD request: nothing downloaded), or null. */
async function getRuntimeBytes() {
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
      // onnxruntime-web's own module worker (its "proxy") compiles the runtime, creates the sessions and runs
      // them, so the page stays responsive while a model loads or runs; inputs and outputs are transferred
      ort.env.wasm.proxy = typeof Worker === "function";
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

/** Resolves in a later task: long work split at it leaves the page room to handle input and paint. */
export function nextTask() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

const modelPromises = new Map(); // model id -> Promise<Model>, shared by every view of the page

/**
 * Load one model: the runtime, the .onnx file and, for MiniLM, its vocabulary.
 * @param {string} id
 * @param {(what: string, bytes: number) => void} onBytes  progress, per file
 * @returns {Promise<{id, info, session, ort, tokenizer}>}
 */
function loadModel(id, onBytes) {
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
      await nextTask(); // the vocabulary's tables are built in a task of their own
      const tokenizer = vocab === null ? null : WordPieceTokenizer.fromVocabText(vocab, { maxLength: info.max_length || 256 });
      markLoaded(id);
      const model = { id, info, session, ort, tokenizer, queue: Promise.resolve() };
      model.prepare = (ids, onFetch) => fetchTokenRows(model, ids, onFetch); // a split model's word vectors
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

/** The inputs and outputs of the toy view's models (mha_lib.export.export_onnx of a chapter-1 TokenClassifier). */
const TOY_INPUTS = ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"];
const TOY_OUTPUTS = ["logits", "attentions"];

/**
 * A model file the reader picked on their own disk (read by the page, never uploaded), for the toy view:
 * an ONNX file that mha_lib.export.export_onnx wrote from a chapter-1 TokenClassifier. Checked against the
 * toy models' contract: inputs exactly TOY_INPUTS, with a head_mask of fixed (num_layers, num_heads) shape,
 * and the outputs logits and attentions (the view then checks their shapes on the reader's sequence).
 * @param {string} name          the file's name: the model's id in the view
 * @param {ArrayBuffer} buffer   the file's bytes
 * @returns {Promise<{id, info, session, ort, tokenizer: null, queue, prepare}>}  a Model (see view.mjs)
 * @throws {Error} the file is not ONNX, or its inputs, outputs or head_mask do not fit; the message names them
 */
async function loadOwnModel(name, buffer) {
  const ort = await loadRuntime(() => {});
  let session;
  try {
    session = await ort.InferenceSession.create(new Uint8Array(buffer), { executionProviders: ["wasm"] });
  } catch (err) {
    throw new Error(`“${name}” could not be read as an ONNX model (${errorText(err)})`);
  }
  const list = (names) => `[${names.join(", ")}]`;
  if (session.inputNames.length !== TOY_INPUTS.length || !TOY_INPUTS.every((n) => session.inputNames.includes(n))) {
    throw new Error(`“${name}” has the inputs ${list(session.inputNames)}; the toy view runs models with the inputs ` +
      `${list(TOY_INPUTS)} (mha_lib.export.export_onnx of a chapter-1 model)`);
  }
  const missing = TOY_OUTPUTS.filter((n) => !session.outputNames.includes(n));
  if (missing.length) throw new Error(`“${name}” has no output ${list(missing)} (its outputs: ${list(session.outputNames)})`);
  const meta = (session.inputMetadata || []).find((m) => m.name === "head_mask");
  const shape = meta && meta.shape;
  if (!shape || shape.length !== 2 || !shape.every((d) => Number.isInteger(d) && d >= 1)) {
    throw new Error(`“${name}”: its head_mask input has no fixed (num_layers, num_heads) shape (got ${JSON.stringify(shape)})`);
  }
  return { id: name, info: { file: name, kind: "token-classifier", num_layers: shape[0], num_heads: shape[1],
    inputs: session.inputNames.slice(), outputs: session.outputNames.slice(), own: true },
  session, ort, tokenizer: null, queue: Promise.resolve(), prepare: async () => {} };
}

/** Bytes still to download for `modelIds`: model files no view of the page has asked for, and the runtime. */
async function bytesToLoad(modelIds) {
  const manifest = await getManifest();
  const fresh = modelIds.filter((id) => !modelPromises.has(id));
  return fresh.reduce((s, id) => s + ((manifest.models[id] || {}).bytes || 0), 0) + (ortPromise ? 0 : await getRuntimeBytes());
}

/** The default backend: onnxruntime-web in the reader's browser, files from the site (see view.mjs). */
export const browserBackend = {
  kind: "browser",
  timesHere: true, // the timing view measures this runtime
  where: "in your browser",
  who: "The model",
  madeWhen: "the book was built",
  privacy: "Typed text never leaves your browser: the model runs on this page.",
  loadModel,
  loadOwnModel,

  /** The "what runs here" line: the browsers that run it, the models and the runtime with their licences. */
  about(modelIds) {
    return { lead: "Runs in browsers with WebAssembly SIMD (recent Chrome, Edge, Firefox, Safari). ",
      parts: licenceParts(modelIds, manifestRead) };
  },

  /**
   * What the first action downloads, in words, from the manifest (`note(info)` adds a split model's word
   * vectors). A manifest that cannot be read is no error yet: the size is said to be unknown.
   * @throws {Error} the browser cannot run WebAssembly with SIMD
   */
  async firstTimeText(modelIds, note) {
    if (!supportsWasmSimd()) throw new Error("this browser cannot run WebAssembly with SIMD");
    const many = modelIds.length > 1 ? "models" : "model";
    let what = `the ${many} and the runtime (their size is unknown: the list of models could not be read)`;
    try {
      const manifest = await getManifest();
      const fresh = modelIds.filter((id) => !loaded.has(id)); // another view may have loaded some
      const model = fresh.reduce((sum, id) => sum + ((manifest.models[id] || {}).bytes || 0), 0);
      const runtime = loaded.has("runtime") ? 0 : await getRuntimeBytes();
      what = downloadText(fresh.length, model, runtime);
      const split = fresh.map((id) => manifest.models[id] || {}).find((m) => m.token_rows);
      if (split) what += note(split);
    } catch (err) {
      console.warn("mha_live: the download size is unknown:", err);
    }
    return what ? `The first time, your browser downloads ${what}; it keeps them.` : "Everything it needs is already loaded.";
  },

  /** Load every model of a view, telling `show.start(totalBytes, text)` and `show.bytes(got, total, text)`. */
  load(modelIds, show) {
    return bytesToLoad(modelIds).then((all) => {
      const what = modelIds.length > 1 ? "the models" : "the model";
      const whatAll = ortPromise ? what : `${what} and the runtime`;
      show.start(all, all ? `Downloading ${whatAll}: 0 of ${formatMB(all)}…` : "Preparing the model…");
      const received = {}; // file -> bytes so far
      const onBytes = (file, n) => {
        received[file] = n;
        const got = Object.values(received).reduce((a, b) => a + b, 0);
        const total = Math.max(all, got);
        show.bytes(got, total, `Downloading ${whatAll}: ${formatMB(got)} of ${formatMB(total)}…`);
      };
      return Promise.all(modelIds.map((id) => loadModel(id, onBytes)));
    });
  },

  loadedText(modelIds, seconds) {
    return `${modelIds.length > 1 ? "The models run" : "The model runs"} in your browser (loaded in ${seconds.toFixed(1)} s).`;
  },

  loadFailedText(message) {
    return `The live model could not be loaded (${message}).`;
  },

  /** `listener()` when any view of the page loads the runtime or a model (what is left to download changes). */
  onLoaded(listener) {
    loadListeners.add(listener);
  },
};
