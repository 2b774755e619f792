// integrity.mjs -- SHA-256 of the files the page fetches, checked against the build's manifest.

import { describeValue } from "./checks.mjs";
import { t } from "./i18n.mjs";

/**
 * SHA-256 (FIPS 180-4) of `bytes` in plain JavaScript, as lowercase hex: for pages without crypto.subtle (an
 * http origin that is not localhost is no "secure context"). About 100 MB/s: a row file or the vocabulary in
 * milliseconds. Self-contained (its constants inside): the download worker (fetch_files.mjs) runs its source.
 */
export function sha256Hex(bytes) {
  // the round constants, and the first hash value
  const K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);
  const H0 = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  const n = bytes.length;
  const total = Math.ceil((n + 9) / 64) * 64; // the message, 0x80, zeros, its length in bits (64-bit big-endian)
  const padded = new Uint8Array(total);
  padded.set(bytes);
  padded[n] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(total - 8, Math.floor(n / 0x20000000));
  view.setUint32(total - 4, (n * 8) >>> 0);
  const hash = new Uint32Array(H0);
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
      const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      [h, g, f, e, d, c, b, a] = [g, f, e, (d + t1) | 0, c, b, a, (t1 + t2) | 0];
    }
    [a, b, c, d, e, f, g, h].forEach((x, i) => { hash[i] += x; });
  }
  return Array.from(hash, (x) => x.toString(16).padStart(8, "0")).join("");
}

/** SHA-256 of `bytes` as hex: the browser's crypto.subtle where the page has it, else sha256Hex. */
export async function sha256Of(bytes, subtle = globalThis.crypto?.subtle) {
  if (!subtle || typeof subtle.digest !== "function") return sha256Hex(bytes);
  const digest = new Uint8Array(await subtle.digest("SHA-256", bytes));
  return Array.from(digest, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * The digest the manifest gives for a file, refused unless it is a SHA-256 in hex.
 * @throws {Error} `models/manifest.json gives no SHA-256 for all-MiniLM-L6-v2.rows/0003.bin (got undefined)`
 */
export function expectDigest(name, expected) {
  if (typeof expected !== "string" || !/^[0-9a-f]{64}$/.test(expected)) {
    throw new Error(`models/manifest.json gives no SHA-256 for ${name} (got ${describeValue(expected)})`);
  }
  return expected;
}

/** The refusal of a file whose SHA-256 (`got`) is not the manifest's (`expected`), naming both. */
export function wrongDigest(name, got, expected) {
  return new Error(t("{name} is not the file the book was built with (its SHA-256 is {got}…, the manifest's {expected}…)",
    { name, got: got.slice(0, 12), expected: expected.slice(0, 12) }));
}

/**
 * Refuse a fetched file whose SHA-256 is not the one the build wrote into the manifest (a file of the
 * right size can still be the wrong one: another row file, a vocabulary shifted by a line).
 * @param {string} name  the file, as the message names it
 * @throws {Error} `all-MiniLM-L6-v2.rows/0003.bin is not the file the book was built with (SHA-256 1f2e… , expected 9a8b…)`
 */
export async function checkDigest(name, bytes, expected) {
  expectDigest(name, expected);
  const got = await sha256Of(bytes);
  if (got !== expected) throw wrongDigest(name, got, expected);
  return bytes;
}
