// ort_runtime.mjs -- onnxruntime-web in the reader's browser: which execution provider, the runtime loaded once
// per build, and every session of the page created and run through one queue.
//
// The runtime runs one thread, inside onnxruntime-web's Web Worker (env.wasm.proxy), so that the page keeps
// answering while a model compiles or runs. The execution provider is picked once per page (chooseProvider):
// WebGPU where the browser gives a hardware GPU adapter, WebAssembly everywhere else and whenever WebGPU cannot
// make a session. Only the chosen build's files are fetched (BUILDS); its binary through fetch_files.mjs (checked
// against files.json, which the book's build writes beside the runtime, and kept for the next visit).

import { fetchBytes, fetchJsonFresh } from "./fetch_files.mjs";
import { errorText } from "./text.mjs";
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
  // navigator.gpu (WebGPU) is not in TypeScript's dom lib
  const gpu = typeof navigator === "object" ? /** @type {Navigator & {gpu?: any}} */ (navigator).gpu : undefined;
  if (!gpu) return { ok: false, software: false, why: "this browser has no WebGPU" };
  let adapter = null;
  try {
    adapter = await withinTime(gpu.requestAdapter(), PROBE_MS, "requestAdapter");
  } catch {
    adapter = null;
  }
  if (!adapter) return { ok: false, software: false, why: "WebGPU gives no GPU adapter here" };
  const software = Boolean((adapter.info?.isFallbackAdapter) || adapter.isFallbackAdapter);
  try {
    (await withinTime(adapter.requestDevice(), PROBE_MS, "requestDevice")).destroy();
  } catch (err) {
    return { ok: false, software, why: `WebGPU gives no device here (${errorText(err)})` };
  }
  return software ? { ok: true, software, why: "WebGPU's only adapter here is a software one (a CPU emulating a GPU)" }
    : { ok: true, software, why: "WebGPU gives a GPU adapter" };
}

let probePromise = null;
/** probeWebGpu, once per page: {ok, software, why} (the speed table says what kind of adapter WebGPU has here). */
export function webgpuHere() {
  if (!probePromise) probePromise = probeWebGpu();
  return probePromise;
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
      const gpu = await webgpuHere();
      if (asked === "webgpu") {
        return gpu.ok ? { ep: "webgpu", why: "the page's address asks for it (mha-ep=webgpu)" }
          : { ep: "wasm", why: `the page's address asks for WebGPU, but ${gpu.why}` };
      }
      return gpu.ok && !gpu.software ? { ep: "webgpu", why: gpu.why } : { ep: "wasm", why: gpu.why };
    })();
  }
  return providerPromise;
}


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

let runtimeFiles = null; // Promise of files.json beside the runtime: {files: {name: {bytes, sha256}}}, or {} without one
/** What the build says of the runtime's files (their sizes and digests), read once; {} where it says nothing. */
function runtimeInfo() {
  if (!runtimeFiles) runtimeFiles = fetchJsonFresh(buildUrl("files.json")).catch(() => ({}));
  return runtimeFiles;
}

/**
 * {bytes, sha256} of the WebAssembly binary the page will fetch for the chosen provider (files.json; where it is
 * missing, a HEAD request gives the size and the file is fetched unchecked); bytes 0 when unknown.
 */
export async function runtimeBinary(ep = null) {
  const key = ep || (await currentBuild());
  const name = BUILDS[key].binary;
  const known = (await runtimeInfo()).files?.[name];
  if (known && Number.isInteger(known.bytes) && typeof known.sha256 === "string") return { name, ...known };
  const bytes = await fetch(buildUrl(name), { method: "HEAD" })
    .then((r) => (r.ok ? Number(r.headers.get("content-length")) || 0 : 0)).catch(() => 0);
  return { name, bytes, sha256: null };
}

export const loaded = new Set(); // "runtime" and model ids, once loaded: shared by every view of the page
const loadListeners = new Set(); // called when something is loaded (views re-say what is left to download)
export function markLoaded(what) {
  loaded.add(what);
  for (const listener of loadListeners) listener(what);
}
/** `listener(what)` whenever the runtime or a model is loaded, by any view of the page. */
export function onLoad(listener) {
  loadListeners.add(listener);
}


const runtimes = new Map(); // build ("wasm" | "webgpu") -> Promise<ort>: each build has its own worker

/** Whether a view of the page has asked for the runtime (its download is no longer ahead). */
export function runtimeRequested() {
  return runtimes.size > 0;
}
let webgpuBroken = null; // why the WebGPU build could not make a session; later models use the WebAssembly build

/** The build the page's next model loads on: the chosen provider's, or WebAssembly's once WebGPU broke. */
export async function currentBuild() {
  return webgpuBroken === null ? (await chooseProvider()).ep : "wasm";
}

/**
 * Import onnxruntime-web once per build (`ep`, or the current build), one thread; `onBytes` follows the
 * .wasm download.
 */
export async function loadRuntime(onBytes, ep = null) {
  const key = ep || (await currentBuild());
  if (!runtimes.has(key)) {
    const promise = (async () => {
      if (!supportsWasmSimd()) throw new Error(t("this browser cannot run WebAssembly with SIMD"));
      const build = BUILDS[key];
      const binary = await runtimeBinary(key);
      const [ort, wasm] = await Promise.all([import(buildUrl(build.module)),
        fetchBytes(buildUrl(build.binary), { onBytes, sha256: binary.sha256, size: binary.sha256 ? binary.bytes : null,
          name: build.binary })]);
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
export async function createSession(bytes, onBytes = () => {}) {
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
  /** run(feeds, fetches?, options?): on WebGPU, or on WebAssembly once WebGPU failed a first run the other ran. */
  session.run = async (feeds, ...rest) => {
    if (fallback) return fallback.run(feeds, ...rest);
    const [fetches, options] = Array.isArray(rest[0]) ? rest : [null, rest[0]];
    const args = (opts) => (fetches ? [fetches, opts] : [opts]);
    const spare = proven ? null : copyFeeds(ort, feeds);
    try {
      // until it has run once, a failure is reported here (a warning), not logged by onnxruntime as an error
      const out = await gpu.run(feeds, ...args(proven ? options : { ...options, logSeverityLevel: 4 }));
      proven = true;
      bytes = null; // no fallback from now on: the bytes can go
      return out;
    } catch (err) {
      if (proven) throw err;
      const wasm = queuedSession(await onWasm(ort));
      let out;
      try {
        out = await wasm.run(spare, ...args(options));
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
export function releaseModel(model) {
  if (model?.session?.release) {
    Promise.resolve().then(() => model.session.release()).catch(() => {});
  }
}

/**
 * The execution providers that ran `models` last, in words: "WebAssembly", "WebGPU" or "WebGPU and WebAssembly";
 * null for models not loaded by this runtime.
 */
export function providerName(models) {
  const names = new Set(models.filter((m) => m?.session?.provider).map((m) => BUILDS[m.session.provider].name));
  return names.size ? [...names].sort().reverse().join(" and ") : null;
}

