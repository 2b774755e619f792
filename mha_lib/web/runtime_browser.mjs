// runtime_browser.mjs -- the default backend: onnxruntime-web in the reader's browser, files from the site.
//
// The model (an ONNX file exported by mha_lib.export, listed with its size in ../models/manifest.json)
// is fetched at the reader's first action and run by onnxruntime-web (vendored in ../vendor/onnxruntime-web/),
// one thread, inside onnxruntime-web's Web Worker (env.wasm.proxy), so that the page keeps answering while
// a model compiles or runs. The execution provider is picked once per page (chooseProvider): WebGPU where the
// browser gives a hardware GPU adapter, WebAssembly everywhere else and whenever WebGPU cannot make a session.
// The runtime and every model are loaded once per page, shared by its views. The views see only
// `browserBackend` (the interface is in view.mjs).

import { WordPieceTokenizer } from "./wordpiece.mjs";
import { checkDigest } from "./integrity.mjs";
import { onnxMetadata } from "./onnx_file.mjs";
import { checkOwnModel, rowFilesFor } from "./compute.mjs";
import { downloadText, errorText, formatMB, modelsText } from "./text.mjs";
import { t } from "./i18n.mjs";

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
  ortDir: besideModule("../vendor/onnxruntime-web/"),
  models: besideModule("../models/"),
};
/**
 * onnxruntime-web's two builds that the site serves, by execution provider: the ES module and the
 * WebAssembly binary its loader asks for (the WebGPU build's binary also runs the WebAssembly provider).
 */
export const BUILDS = {
  wasm: { name: "WebAssembly", module: "ort.wasm.min.mjs", binary: "ort-wasm-simd-threaded.wasm" },
  webgpu: { name: "WebGPU", module: "ort.webgpu.min.mjs", binary: "ort-wasm-simd-threaded.asyncify.wasm" },
};
const buildUrl = (file) => new URL(file, URLS.ortDir).href;

/** The provider the page's address asks for (?mha-ep=wasm or ?mha-ep=webgpu), or null. */
function askedProvider() {
  try {
    const asked = new URLSearchParams(globalThis.location ? globalThis.location.search : "").get("mha-ep");
    return Object.hasOwn(BUILDS, asked) ? asked : null;
  } catch {
    return null;
  }
}

const PROBE_MS = 5000; // a WebGPU probe that takes longer counts as no WebGPU: WebAssembly runs

/** `promise`, or a rejection naming `what` after `ms` milliseconds. */
function withinTime(promise, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Can WebGPU run here? A GPU adapter, and a device from it (made and destroyed at once: a browser can give an
 * adapter and then refuse the device, and onnxruntime's worker does not recover from that refusal).
 * @returns {Promise<{ok: boolean, software: boolean, why: string}>}
 */
async function probeWebGpu() {
  const gpu = typeof navigator === "object" ? navigator.gpu : undefined;
  if (!gpu) return { ok: false, software: false, why: "this browser has no WebGPU" };
  let adapter = null;
  try {
    adapter = await withinTime(gpu.requestAdapter(), PROBE_MS, "requestAdapter");
  } catch {
    adapter = null;
  }
  if (!adapter) return { ok: false, software: false, why: "WebGPU gives no GPU adapter here" };
  const software = Boolean((adapter.info && adapter.info.isFallbackAdapter) || adapter.isFallbackAdapter);
  try {
    (await withinTime(adapter.requestDevice(), PROBE_MS, "requestDevice")).destroy();
  } catch (err) {
    return { ok: false, software, why: `WebGPU gives no device here (${errorText(err)})` };
  }
  return software ? { ok: true, software, why: "WebGPU's only adapter here is a software one (a CPU emulating a GPU)" }
    : { ok: true, software, why: "WebGPU gives a GPU adapter" };
}

let providerPromise = null;
/**
 * Which execution provider runs this page's models: the one the address asks for (?mha-ep=wasm or webgpu;
 * WebGPU only where probeWebGpu finds a device), else WebGPU on a hardware GPU adapter, else WebAssembly
 * (a software adapter such as SwiftShader is slower than WebAssembly). Asked once per page, when a view first
 * says its download size (the probe opens a WebGPU device on the page and closes it; it fetches nothing).
 * @returns {Promise<{ep: "wasm"|"webgpu", why: string}>}
 */
export function chooseProvider() {
  if (!providerPromise) {
    providerPromise = (async () => {
      const asked = askedProvider();
      if (asked === "wasm") return { ep: "wasm", why: "the page's address asks for it (mha-ep=wasm)" };
      const gpu = await probeWebGpu();
      if (asked === "webgpu") {
        return gpu.ok ? { ep: "webgpu", why: "the page's address asks for it (mha-ep=webgpu)" }
          : { ep: "wasm", why: `the page's address asks for WebGPU, but ${gpu.why}` };
      }
      return gpu.ok && !gpu.software ? { ep: "webgpu", why: gpu.why } : { ep: "wasm", why: gpu.why };
    })();
  }
  return providerPromise;
}

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
    const info = manifest && manifest.models ? manifest.models[id] : null;
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

/** The bytes of `response`'s body (an ArrayBuffer), `onBytes(received)` after each chunk. Also sent, as source,
 * to the download worker below: one loop for both threads. */
async function readBody(response, onBytes) {
  if (!response.body || !response.body.getReader) {
    const buffer = await response.arrayBuffer();
    onBytes(buffer.byteLength);
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
  // joined by the browser (a Blob), not by a loop of ours: a model is 22 MB
  return new Blob(chunks).arrayBuffer();
}

// A large download is read in a worker of its own. On the page's thread, finishing the body of a 14-22 MB file
// cost one task of 26-35 ms of CPU (Chromium traces of chapter 5's first run), which with the result's drawing
// came close to the 50 ms bound. The worker streams the body, reports its progress and transfers the bytes.
const DOWNLOAD_WORKER = `${readBody.toString()}
self.onmessage = async (event) => {
  const url = event.data.url;
  try {
    const response = await fetch(url);
    if (!response.ok) { self.postMessage({ error: "HTTP " + response.status + " for " + url }); return; }
    const buffer = await readBody(response, (received) => self.postMessage({ received }));
    self.postMessage({ buffer }, [buffer]);
  } catch (err) {
    self.postMessage({ error: String((err && err.message) || err) });
  }
};`;
let downloadWorkerUrl = null;

/** The bytes of `url`, downloaded in a worker; rejects with {workerFailed: true} where no worker can start. */
function fetchInWorker(url, onBytes) {
  return new Promise((resolve, reject) => {
    let worker;
    try {
      downloadWorkerUrl = downloadWorkerUrl || URL.createObjectURL(new Blob([DOWNLOAD_WORKER], { type: "text/javascript" }));
      worker = new Worker(downloadWorkerUrl);
    } catch (err) {
      reject(Object.assign(new Error(errorText(err)), { workerFailed: true }));
      return;
    }
    worker.onmessage = ({ data }) => {
      if (data.buffer) {
        worker.terminate();
        resolve(new Uint8Array(data.buffer));
      } else if (data.error) {
        worker.terminate();
        reject(new Error(data.error));
      } else {
        onBytes(data.received);
      }
    };
    worker.onerror = (event) => { // the worker's script did not run (a page policy that forbids blob: workers)
      event.preventDefault();
      worker.terminate();
      reject(Object.assign(new Error(event.message || "the download worker did not start"), { workerFailed: true }));
    };
    worker.postMessage({ url: new URL(url, globalThis.location ? globalThis.location.href : undefined).href });
  });
}

/**
 * GET `url` (a plain GET: the browser's HTTP cache keeps the file) and report progress; the bytes as a
 * Uint8Array, read in a worker where one can start, else on the page's thread.
 */
async function fetchBytes(url, onBytes) {
  if (typeof Worker === "function" && typeof URL.createObjectURL === "function") {
    try {
      return await fetchInWorker(url, onBytes);
    } catch (err) {
      if (!err.workerFailed) throw err;
    }
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${url}`);
  return new Uint8Array(await readBody(response, onBytes));
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

let runtimeBytes = null; // size of the chosen build's WebAssembly binary, from a HEAD request
/** Size in bytes of the WebAssembly binary the page will fetch (a HEAD request: nothing downloaded), or 0. */
async function getRuntimeBytes() {
  if (runtimeBytes === null) {
    runtimeBytes = chooseProvider().then(({ ep }) => fetch(buildUrl(BUILDS[ep].binary), { method: "HEAD" }))
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

const runtimes = new Map(); // build ("wasm" | "webgpu") -> Promise<ort>: each build has its own worker
let webgpuBroken = null; // why the WebGPU build could not make a session; later models use the WebAssembly build

/** The build the page's next model loads on: the chosen provider's, or WebAssembly's once WebGPU broke. */
async function currentBuild() {
  return webgpuBroken === null ? (await chooseProvider()).ep : "wasm";
}

/**
 * Import onnxruntime-web once per build (`ep`, or the current build), one thread; `onBytes` follows the
 * .wasm download.
 */
async function loadRuntime(onBytes, ep = null) {
  const key = ep || (await currentBuild());
  if (!runtimes.has(key)) {
    const promise = (async () => {
      if (!supportsWasmSimd()) throw new Error(t("this browser cannot run WebAssembly with SIMD"));
      const build = BUILDS[key];
      const [ort, wasm] = await Promise.all([import(buildUrl(build.module)), fetchBytes(buildUrl(build.binary), onBytes)]);
      // onnxruntime-web's own module worker (its "proxy") compiles the runtime, creates the sessions and runs
      // them, so the page stays responsive while a model loads or runs; inputs and outputs are transferred
      ort.env.wasm.proxy = typeof Worker === "function";
      ort.env.wasm.numThreads = 1; // static hosts send no cross-origin isolation: one thread for everyone
      ort.env.wasm.wasmPaths = URLS.ortDir; // the loader module beside the build's module
      ort.env.wasm.wasmBinary = wasm.buffer; // fetched above, with progress
      markLoaded("runtime");
      return ort;
    })();
    promise.catch(() => {
      if (runtimes.get(key) === promise) runtimes.delete(key); // let a later action try again
    });
    runtimes.set(key, promise);
  }
  return runtimes.get(key);
}

// onnxruntime-web's worker answers each kind of request ("create", "run") in the order it was sent, and the
// page matches the answers in that order; on WebGPU the worker's creates and runs are asynchronous and can
// finish out of order (seen here: a model got another model's session). So the page sends the worker one
// request at a time: every session creation and run of the page goes through this one queue.
let workerQueue = Promise.resolve();
function oneAtATime(task) {
  const done = workerQueue.then(task, task);
  workerQueue = done.catch(() => {});
  return done;
}

/** `session` with its run() sent through the page's one queue (the names and metadata are the session's). */
function queuedSession(session) {
  const queued = Object.create(session);
  queued.run = (...args) => oneAtATime(() => session.run(...args));
  queued.release = () => oneAtATime(() => session.release());
  return queued;
}

// errors only: not onnxruntime's warning, on WebGPU, that some nodes of each model run on the CPU (shape ops)
const SESSION = { logSeverityLevel: 3 };

/** A copy of a run's feeds: the worker takes the buffers it is sent, and a run may have to be sent again. */
function copyFeeds(ort, feeds) {
  const copy = {};
  for (const [name, t] of Object.entries(feeds)) copy[name] = new ort.Tensor(t.type, t.data.slice(), t.dims);
  return copy;
}

/**
 * An inference session for a model's bytes, on the current build's provider, and the runtime it runs on:
 * {session: {run, inputNames, outputNames, inputMetadata, provider: "webgpu"|"wasm", why}, ort}.
 * On WebGPU, the nodes it has no kernel for run on the CPU inside the same session (onnxruntime assigns them).
 * Where WebGPU cannot make the session, this and every later model load on the WebAssembly build (its own
 * worker: the WebGPU build's does not recover). Where its first run fails (seen here: SwiftShader has no
 * shader-f16, which MiniLM's float16 weights need), the model runs on the WebGPU build's WebAssembly provider
 * from then on, the first run is sent again there, and `why` says why: the reader sees the maps. A WebGPU
 * session that has run once keeps its errors (they are the input's, not the device's).
 * @param {Uint8Array} bytes  the .onnx file (handed to the worker: do not use it afterwards)
 * @param {(bytes: number) => void} onBytes  progress of a runtime download, if one is needed
 */
async function createSession(bytes, onBytes = () => {}) {
  const onWasm = async (ort) => oneAtATime(() => ort.InferenceSession.create(bytes, { ...SESSION, executionProviders: ["wasm"] }));
  const settle = (ort, session, why) => ({ session: Object.assign(queuedSession(session), { provider: "wasm", why }), ort });
  if ((await currentBuild()) === "wasm") {
    const ort = await loadRuntime(onBytes, "wasm");
    return settle(ort, await onWasm(ort), webgpuBroken || (await chooseProvider()).why);
  }
  const ort = await loadRuntime(onBytes, "webgpu");
  let gpu;
  try {
    const copy = bytes.slice(); // WebAssembly needs the bytes if WebGPU fails
    gpu = queuedSession(await oneAtATime(() => ort.InferenceSession.create(copy, { ...SESSION, executionProviders: ["webgpu"] })));
  } catch (err) {
    const wasm = await loadRuntime(onBytes, "wasm");
    const session = await onWasm(wasm); // a file WebAssembly cannot load either is the file's fault: its error
    console.warn("mha_live: WebGPU could not load the model; the WebAssembly build runs it:", err);
    webgpuBroken = webgpuBroken || `WebGPU could not load a model (${errorText(err)})`;
    return settle(wasm, session, webgpuBroken);
  }
  const session = Object.assign(Object.create(gpu), { provider: "webgpu", why: (await chooseProvider()).why });
  let proven = false;
  let fallback = null;
  /** run(feeds, options?): on WebGPU, or on WebAssembly once WebGPU failed a first run the other ran. */
  session.run = async (feeds, options) => {
    if (fallback) return fallback.run(feeds, options);
    const spare = proven ? null : copyFeeds(ort, feeds);
    try {
      // until it has run once, a failure is reported here (a warning), not logged by onnxruntime as an error
      const out = await gpu.run(feeds, proven ? options : { ...options, logSeverityLevel: 4 });
      proven = true;
      bytes = null; // no fallback from now on: the bytes can go
      return out;
    } catch (err) {
      if (proven) throw err;
      const wasm = queuedSession(await onWasm(ort));
      let out;
      try {
        out = await wasm.run(spare, options);
      } catch (wasmErr) { // WebAssembly fails too: the input's fault; WebGPU keeps the model
        wasm.release().catch(() => {});
        throw wasmErr;
      }
      console.warn("mha_live: WebGPU could not run the model; it runs on WebAssembly:", err);
      fallback = wasm;
      bytes = null;
      gpu.release().catch(() => {});
      Object.assign(session, { provider: "wasm", why: `WebGPU could not run it (${errorText(err)})` });
      return out;
    }
  };
  session.release = () => (fallback || gpu).release();
  return { session, ort };
}

/** Free a model's session in its worker (the reader's own model, replaced or dropped); errors are ignored. */
function releaseModel(model) {
  if (model && model.session && model.session.release) {
    Promise.resolve().then(() => model.session.release()).catch(() => {});
  }
}

/**
 * The execution providers that ran `models` last, in words: "WebAssembly", "WebGPU" or "WebGPU and WebAssembly";
 * null for models not loaded by this runtime.
 */
export function providerName(models) {
  const names = new Set(models.filter((m) => m && m.session && m.session.provider).map((m) => BUILDS[m.session.provider].name));
  return names.size ? [...names].sort().reverse().join(" and ") : null;
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
      const runtimeBytes = (n) => onBytes("runtime", n);
      const [, bytes, vocab] = await Promise.all([
        loadRuntime(runtimeBytes), // fetched beside the model
        fetchBytes(URLS.models + info.file, (n) => onBytes(id, n)),
        info.vocab ? fetchVocab(info) : null,
      ]);
      const { session, ort } = await createSession(bytes, runtimeBytes);
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
  const shape = meta && meta.shape;
  if (!shape || shape.length !== 2 || !shape.every((d) => Number.isInteger(d) && d >= 1)) {
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

/** Bytes still to download for `modelIds`: model files no view of the page has asked for, and the runtime. */
async function bytesToLoad(modelIds) {
  const manifest = await getManifest();
  const fresh = modelIds.filter((id) => !modelPromises.has(id));
  return fresh.reduce((s, id) => s + ((manifest.models[id] || {}).bytes || 0), 0) + (runtimes.size ? 0 : await getRuntimeBytes());
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
      const model = fresh.reduce((sum, id) => sum + ((manifest.models[id] || {}).bytes || 0), 0);
      const runtime = loaded.has("runtime") ? 0 : await getRuntimeBytes();
      what = downloadText(fresh.length, model, runtime);
      const split = fresh.map((id) => manifest.models[id] || {}).find((m) => m.token_rows);
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
      const what = runtimes.size ? (many ? t("the models") : t("the model"))
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
    loadListeners.add(listener);
  },
};
