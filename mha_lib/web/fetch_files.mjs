// fetch_files.mjs -- every file the live views fetch: read in a worker, checked, and kept for the next visit.
//
// One download worker (a blob: module of this file's readBody and integrity.mjs's sha256Hex) fetches each file,
// streams its body with progress, checks its SHA-256 against the build's (crypto.subtle, or plain JavaScript
// where the page is no secure context) and transfers the bytes to the page: the page's thread never holds a
// 14 MB body or hashes it. Where the browser has the Cache API (a secure context: https, localhost), a checked
// file is kept there under its URL and digest, so that a second visit, another page of the book, or a visit
// offline reads it from the cache instead of the network; a file whose digest changed (a new build) is fetched
// again, and the old copy dropped. The page's thread is the fallback where no worker starts (a page policy
// that forbids blob: workers, node's tests). Files without a digest (the manifest) are asked of the network
// first, and read from the cache only when the network fails.

import { expectDigest, sha256Hex, sha256Of, wrongDigest } from "./integrity.mjs";

/** The Cache API cache holding the checked files (a new name drops every older copy's use). */
export const FILE_CACHE = "mha-live-files-v1";

/** Every file fetched by this page, in order: {url, bytes, cached, ms}; the debug readout and the benchmark read it. */
export const fetchedFiles = [];

/** The bytes of `response`'s body (an ArrayBuffer), `onBytes(received)` after each chunk. Also run, as source,
 * by the download worker: one loop for both threads. */
async function readBody(response, onBytes) {
  if (!response.body?.getReader) {
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
  // joined by the browser (a Blob), not by a loop of ours: a layer is 3.5 MB, the runtime 14 MB
  return new Blob(chunks).arrayBuffer();
}

/** The cache key of a file checked against `sha256`: its URL with the digest, so that a new build's file is another key. */
function cacheKey(url, sha256) {
  const key = new URL(url);
  key.searchParams.set("mha-sha256", sha256);
  return key.href;
}

/**
 * One fetch, on either thread: from the cache when a copy with the same digest is there, else from the network.
 * `hash(bytes)` gives the hex SHA-256. Returns the bytes and, for a file fetched from the network and checked,
 * `keep()`: it stores a copy in the cache (older copies of a large file's URL dropped), to call once the bytes
 * are handed over (it is off the critical path).
 * @returns {Promise<{buffer: ArrayBuffer, cached: boolean, keep: () => Promise<void>}>}
 */
async function fetchChecked(url, sha256, size, onBytes, hash, cacheName) {
  const cache = cacheName && sha256 && typeof caches === "object" ? await caches.open(cacheName).catch(() => null) : null;
  if (cache) {
    const hit = await cache.match(cacheKey(url, sha256)).catch(() => null);
    if (hit) {
      const buffer = await readBody(hit, onBytes);
      if ((await hash(new Uint8Array(buffer))) === sha256) return { buffer, cached: true, keep: async () => {} };
      await cache.delete(cacheKey(url, sha256)).catch(() => {}); // a damaged copy: fetch it again
    }
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${url}`);
  const buffer = await readBody(response, onBytes);
  if (size !== null && buffer.byteLength !== size) throw Object.assign(new Error("size"), { size: buffer.byteLength });
  if (sha256) {
    const got = await hash(new Uint8Array(buffer));
    if (got !== sha256) throw Object.assign(new Error("digest"), { digest: got });
  }
  const copy = cache ? new Response(buffer.slice(0)) : null; // a copy: the buffer itself is handed over
  const keep = async () => {
    if (!cache) return;
    try {
      if (buffer.byteLength > (1 << 20)) { // a large file of an earlier build (another digest) is dropped
        for (const old of await cache.keys()) {
          const u = new URL(old.url);
          u.search = "";
          if (u.href === url && old.url !== cacheKey(url, sha256)) await cache.delete(old);
        }
      }
      await cache.put(cacheKey(url, sha256), copy);
    } catch {
      // a full or refused cache: the file is still used, only not kept
    }
  };
  return { buffer, cached: false, keep };
}

// Files are stored in the cache once the page has been quiet for KEEP_AFTER_MS (no new fetch), one at a time:
// writing the runtime's 14 MB while the first maps are computed would slow them on a small device.
const KEEP_AFTER_MS = 2000;

const WORKER_SOURCE = `${readBody.toString()}
${cacheKey.toString()}
${sha256Hex.toString()}
${fetchChecked.toString()}
async function hash(bytes) {
  if (!(self.crypto && self.crypto.subtle)) return sha256Hex(bytes);
  const d = new Uint8Array(await self.crypto.subtle.digest("SHA-256", bytes));
  return Array.from(d, (x) => x.toString(16).padStart(2, "0")).join("");
}
const keeps = [];
let keepTimer = null;
let keeping = false;
async function storeAll() {
  if (keeping) return;
  keeping = true;
  while (keeps.length) await keeps.shift()();
  keeping = false;
  self.postMessage({ settled: true });
}
function later(keep) {
  keeps.push(keep);
  clearTimeout(keepTimer);
  keepTimer = setTimeout(storeAll, ${KEEP_AFTER_MS});
}
self.onmessage = async (event) => {
  const { id, url, sha256, size, cacheName } = event.data;
  if (event.data.settle) { // the page asks to be told when every file is stored
    if (!keeps.length && !keeping) self.postMessage({ settled: true });
    return;
  }
  clearTimeout(keepTimer); // a fetch: the page is busy
  try {
    const { buffer, cached, keep } = await fetchChecked(url, sha256, size, (received) => self.postMessage({ id, received }),
      hash, cacheName);
    self.postMessage({ id, buffer, cached }, [buffer]);
    if (!cached) later(keep);
  } catch (err) {
    self.postMessage({ id, error: String((err && err.message) || err), digest: err && err.digest, size: err && err.size });
  }
  if (keeps.length && !keeping) keepTimer = setTimeout(storeAll, ${KEEP_AFTER_MS});
};`;

let worker = null; // the one download worker, started at the first fetch; null where none can start
let workerFailed = false;
let requests = 0;
const waiting = new Map(); // request id -> {resolve, reject, onBytes}

/** The download worker, started once; null where the page forbids blob: workers (or has no Worker). */
function downloadWorker() {
  if (worker || workerFailed) return worker;
  if (typeof Worker !== "function" || typeof URL.createObjectURL !== "function") {
    workerFailed = true;
    return null;
  }
  try {
    worker = new Worker(URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" })));
  } catch {
    workerFailed = true;
    return null;
  }
  worker.onmessage = ({ data }) => {
    if (data.settled) {
      for (const resolve of settling.splice(0)) resolve();
      return;
    }
    const job = waiting.get(data.id);
    if (!job) return;
    if (data.buffer) {
      waiting.delete(data.id);
      job.resolve(data);
    } else if (data.error) {
      waiting.delete(data.id);
      job.reject(Object.assign(new Error(data.error), { digest: data.digest, size: data.size }));
    } else {
      job.onBytes(data.received);
    }
  };
  worker.onerror = (event) => { // the worker's script did not run (a page policy): every waiting file goes to the page
    event.preventDefault();
    workerFailed = true;
    worker = null;
    for (const job of waiting.values()) job.reject(Object.assign(new Error("the download worker did not start"), { workerFailed: true }));
    waiting.clear();
  };
  return worker;
}

const settling = []; // resolvers of filesKept()

/**
 * Resolves once every file fetched so far is stored in the cache (the download worker stores them after the page
 * has been quiet for a moment): benchmarks/bench_live.py times later updates after it, as a reader reading.
 */
export function filesKept() {
  if (!worker) return Promise.resolve();
  return new Promise((resolve) => {
    settling.push(resolve);
    worker.postMessage({ settle: true });
  });
}

/**
 * GET `url` and report progress: the bytes as a Uint8Array. With `sha256` (a file of the build: the manifest
 * gives its digest) the file is checked against it, and read from the Cache API's copy where one with that
 * digest is kept; without it (null), it is fetched as it is. Read in the download worker where one starts, else
 * on the page's thread.
 * @param {string} url
 * @param {{onBytes?: (received: number) => void, sha256?: string|null|undefined, size?: number|null, name?: string}}
 *   options  sha256: hex, or null for a file that has none (undefined is a manifest that lacks one: refused);
 *   size: the bytes it must hold, checked first (null: any); name: the file as an error names it
 * @throws {Error} an HTTP error, a digest the manifest lacks, or a file that is not the one the build wrote
 *   (`all-MiniLM-L6-v2.rows/0002.bin holds 2 bytes, not 24576`; or its name and both digests)
 */
export async function fetchBytes(url, { onBytes = () => {}, sha256, size = null, name = url }) {
  if (sha256 !== null) expectDigest(name, sha256);
  const absolute = new URL(url, globalThis.location ? globalThis.location.href : undefined).href;
  const t0 = typeof performance === "object" ? performance.now() : 0;
  let result = null;
  const w = downloadWorker();
  try {
    if (w) {
      requests += 1;
      const id = requests;
      result = await new Promise((resolve, reject) => {
        waiting.set(id, { resolve, reject, onBytes });
        w.postMessage({ id, url: absolute, sha256, size, cacheName: FILE_CACHE });
      }).catch((err) => {
        if (err.workerFailed) return null; // the page's thread reads it below
        throw err;
      });
    }
    if (!result) {
      result = await fetchChecked(absolute, sha256, size, onBytes, (bytes) => sha256Of(bytes), FILE_CACHE);
      result.keep(); // stored in the background
    }
  } catch (err) {
    if (err.size !== undefined) throw new Error(`${name} holds ${err.size} bytes, not ${size}`);
    throw err.digest ? wrongDigest(name, err.digest, sha256) : err;
  }
  const bytes = new Uint8Array(result.buffer);
  fetchedFiles.push({ url: absolute, bytes: bytes.byteLength, cached: result.cached,
    ms: (typeof performance === "object" ? performance.now() : 0) - t0 });
  return bytes;
}

/**
 * A small JSON file that may change at every build (the manifest): asked of the network first; its last good
 * copy is kept in the Cache API and read from there when the network fails (offline).
 * @throws {Error} the network failed (or answered with an error) and no copy is kept
 */
export async function fetchJsonFresh(url) {
  const cache = typeof caches === "object" ? await caches.open(FILE_CACHE).catch(() => null) : null;
  let response = null;
  let failure = null;
  try {
    response = await fetch(url);
    if (!response.ok) failure = new Error(`HTTP ${response.status} for ${url}`);
  } catch (err) {
    failure = err;
  }
  if (!failure) {
    if (cache && typeof response.clone === "function") cache.put(url, response.clone()).catch(() => {});
    return response.json();
  }
  const kept = cache ? await cache.match(url).catch(() => null) : null;
  if (kept) return kept.json();
  throw failure;
}
