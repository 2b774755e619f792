// checks.mjs -- the one check of every list the views take (run() input, masks, configurations), and
// the checks of the views' run() inputs. Errors name the offending value.

/** A value as the error messages quote it: strings in quotes, NaN, null, arrays and objects by kind. */
export function describeValue(v) {
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (Array.isArray(v)) {
    const flaw = arrayFlaw(v);
    return flaw ? `${flaw.includes("hole") ? "a sparse array" : "an array"} of ${v.length} (${flaw})`
      : `an array of ${v.length}`;
  }
  if (v === null) return "null";
  if (typeof v === "object") return "an object";
  return String(v); // numbers (NaN, Infinity included), booleans, undefined
}

/**
 * What keeps an Array from being a plain list: holes (`new Array(6)`, `[1, , 2]`) or own
 * properties besides its indices and length (`a.foo = 1`). null for a plain list.
 * @returns {string|null} "holes at 0, 1, 2, …" or `the extra property "foo"`
 */
export function arrayFlaw(list) {
  const holes = [];
  for (let i = 0; i < list.length && holes.length < 4; i++) if (!Object.hasOwn(list, i)) holes.push(i);
  if (holes.length) return `${holes.length > 1 ? "holes" : "a hole"} at ${holes.slice(0, 3).join(", ")}${holes.length > 3 ? ", …" : ""}`;
  const extra = Reflect.ownKeys(list).filter((k) => k !== "length" && !(typeof k === "string" && /^(0|[1-9]\d*)$/.test(k)));
  return extra.length ? `the extra property ${typeof extra[0] === "string" ? JSON.stringify(extra[0]) : String(extra[0])}` : null;
}

/**
 * The one check of every list the views take (run() input, masks, configurations): `value` must be
 * a plain Array -- no holes, no other properties -- of `length` items (any number when null), each
 * passed through `item(v, i)`, which returns the value to keep or calls `fail`.
 * @param {*} value
 * @param {{name: string, length?: number|null, what?: string, item?: Function, fail?: Function}} spec
 *   name: how messages call it ("ids", "mask[2]"); what: its items ("tokens", "0/1 values")
 * @returns {Array} a copy (the caller may change its array afterwards)
 * @throws {Error} via `fail`, naming the value: `ids must be a list of 16 tokens, got a sparse array of 16 (holes at 0, 1, 2, …)`
 */
export function checkArray(value, { name, length = null, what = "values", item = (v) => v, fail = throwError }) {
  if (!isList(value)) {
    return fail(`${name} must be a list of ${length === null ? "" : `${length} `}${what}, got ${describeValue(value)}`);
  }
  if (length !== null && value.length !== length) return fail(`${name} has ${value.length} ${what}, expected ${length}`);
  const copy = new Array(value.length);
  for (let i = 0; i < value.length; i++) copy[i] = item(value[i], i);
  return copy;
}

/** Is `value` a plain list: an Array without holes or other properties (what checkArray accepts)? */
export function isList(value) {
  return Array.isArray(value) && !arrayFlaw(value);
}

function throwError(message) {
  throw new Error(message);
}

/**
 * Check a toy view's input {ids, types} against the models' sequence length and vocabulary.
 * @param {*} input          what run() was given
 * @param {number} length    L, the sequence length of the view (every model reads L tokens)
 * @param {number} vocabSize V: tokens are integers in 0..V-1
 * @returns {{ids:number[], types:number[]}} copies, safe to keep
 * @throws {Error} naming the offending value: "ids[3] = 9 is out of 0..7", "2 marked positions (3, 5)"
 */
export function checkToyInput(input, length, vocabSize) {
  const fail = (what) => {
    throw new Error(`run({ids, types}): ${what}`);
  };
  if (!input || typeof input !== "object" || Array.isArray(input)) fail(`takes an object {ids, types}, got ${describeValue(input)}`);
  const token = (t, i) => {
    if (!Number.isInteger(t)) fail(`ids[${i}] = ${describeValue(t)} is not an integer token in 0..${vocabSize - 1}`);
    if (t < 0 || t >= vocabSize) fail(`ids[${i}] = ${t} is out of 0..${vocabSize - 1}`);
    return t;
  };
  const mark = (t, i) => (t === 0 || t === 1 ? t : fail(`types[${i}] = ${describeValue(t)} is not 0 or 1`));
  const ids = checkArray(input.ids, { name: "ids", length, what: "tokens", item: token, fail });
  const types = checkArray(input.types, { name: "types", length, what: "0/1 values", item: mark, fail });
  const marked = types.flatMap((t, i) => (t === 1 ? [i] : []));
  if (marked.length !== 1) {
    fail(marked.length === 0 ? "no marked position (types has no 1); exactly one is needed"
      : `${marked.length} marked positions (${marked.join(", ")}); exactly one is needed`);
  }
  return { ids, types };
}

/**
 * Check a digit view's input: `length` grey levels (numbers in [0, 1], row by row), as a list or {pixels}.
 * @returns {number[]} a copy
 * @throws {Error} naming the offending value: "pixels[12] = 1.5 is outside [0, 1]", "pixels has 63 grey levels, expected 64"
 */
export function checkDigitInput(input, length) {
  const fail = (what) => {
    throw new Error(`run(pixels): ${what}`);
  };
  const pixels = input && typeof input === "object" && !Array.isArray(input) ? input.pixels : input;
  const level = (v, i) => {
    if (typeof v !== "number" || !Number.isFinite(v)) fail(`pixels[${i}] = ${describeValue(v)} is not a number`);
    if (v < 0 || v > 1) fail(`pixels[${i}] = ${v} is outside [0, 1] (0 = paper, 1 = ink)`);
    return v;
  };
  return checkArray(pixels, { name: "pixels", length, what: "grey levels", item: level, fail });
}

/**
 * Check a head mask: numLayers rows of numHeads values, each 0 or 1 (numbers) or a boolean.
 * @returns {number[][]} [layer][head] of 0/1, a copy
 * @throws {Error} naming the offending value: `mask[2][5] = "0" is not 0/1 ...`, "mask has 5 rows, expected 6"
 */
export function checkHeadMask(mask, numLayers, numHeads) {
  const fail = (what) => {
    throw new Error(`mask must be ${numLayers} x ${numHeads} of 0/1 (numbers or booleans): ${what}`);
  };
  const value = (v, l, h) => (v === 0 || v === 1 || typeof v === "boolean" ? (v ? 1 : 0)
    : fail(`mask[${l}][${h}] = ${describeValue(v)} is not 0/1`));
  const row = (r, l) => checkArray(r, { name: `mask[${l}]`, length: numHeads, item: (v, h) => value(v, l, h), fail });
  return checkArray(mask, { name: "mask", length: numLayers, what: "rows", item: row, fail });
}
