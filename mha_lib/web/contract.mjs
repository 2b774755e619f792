// contract.mjs -- checkConfig: a view's data-config against view_contract.json, before anything is drawn.
//
// view_contract.json says, per view, the keys its drawing reads and their shapes; mha_lib.live (Python)
// checks the same file, with the same messages, before it writes the page (tests/test_web.py runs both
// on the same bad configurations). A message names the key path the way both languages write it:
// 'results'['ch1-h1']['attentions'][0][1].

import { describeValue, isList } from "./checks.mjs";

const INLINE_CONTRACT = null; // widget_esm() puts view_contract.json here (a blob: module has no folder to read)

/** A JSON file beside this module: fetched in a page, read from disk under node (its tests). */
async function readBeside(name) {
  const url = new URL(name, import.meta.url);
  if (url.protocol === "file:") {
    // node only (its tests): a specifier in a variable, so that TypeScript's checker, which has no node types here
    // (jsconfig.json: "types": []), neither resolves it nor types it (any)
    const nodeFs = "node:fs/promises";
    const fs = await import(nodeFs);
    return JSON.parse(await fs.readFile(url, "utf8"));
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${url}`);
  return response.json();
}

/** The contract: {views: {view: {model, keys: {key: rule}}}} (the file's "about" says what a rule is). */
export const VIEW_CONTRACT = INLINE_CONTRACT === null ? await readBeside("./view_contract.json") : INLINE_CONTRACT;

/** A size of the contract: a number, a key (its length, or its integer value) or "N*key". */
function sizeOf(spec, config) {
  if (typeof spec === "number") return spec;
  const [, factor, key] = /^(?:(\d+)\*)?(\w+)$/.exec(spec);
  const value = config[key];
  return Number(factor || 1) * (Array.isArray(value) ? value.length : value);
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const quoted = (values) => values.map((x) => JSON.stringify(x)).join(", ");

/**
 * Check `value` (at `path`, e.g. 'texts'[3]) against `rule`; `config` is the whole configuration (sizes).
 * @throws {Error} via fail: `'tokens' must be a non-empty list, got an array of 0`
 */
function checkRule(value, rule, path, config, fail) {
  const must = (ok, what) => ok || fail(`${path} must be ${what}, got ${describeValue(value)}`);
  switch (rule.type) {
    case "str":
      return must(typeof value === "string", "a string");
    case "number":
      return must(typeof value === "number" && Number.isFinite(value), "a number");
    case "int": {
      const bounds = [];
      if (rule.min !== undefined) bounds.push(`>= ${rule.min}`);
      if (rule.below !== undefined) bounds.push(`< ${sizeOf(rule.below, config)} (the length of '${rule.below}')`);
      const ok = Number.isInteger(value) && !(value < rule.min) && !(rule.below !== undefined && value >= sizeOf(rule.below, config));
      return must(ok, `an integer${bounds.length ? ` ${bounds.join(" and ")}` : ""}`);
    }
    case "enum":
      return must(rule.values.some((x) => x === value), `one of ${quoted(rule.values)}`);
    case "object":
      must(isObject(value), "an object");
      for (const [key, inner] of Object.entries(rule.keys || {})) {
        if (!(inner.optional && value[key] === undefined)) checkRule(value[key], inner, `${path}['${key}']`, config, fail);
      }
      return;
    case "list": {
      let what = "a list";
      let ok = isList(value);
      if (rule.min_length !== undefined) {
        const n = sizeOf(rule.min_length, config);
        what = n === 1 ? "a non-empty list" : `a list of at least ${n} items`;
        if (typeof rule.min_length === "string") what += ` (${rule.min_length})`;
        ok = ok && value.length >= n;
      }
      if (rule.length !== undefined) {
        const n = sizeOf(rule.length, config);
        what = `a list of ${n} items${typeof rule.length === "string" ? ` (${rule.length})` : ""}`;
        ok = ok && value.length === n;
      }
      must(ok, what);
      if (rule.items) value.forEach((v, i) => checkRule(v, rule.items, `${path}[${i}]`, config, fail));
      return;
    }
    case "maps": {
      const square = rule.side !== undefined; // else rows and cols: a map that is not square (cross-attention)
      const n = sizeOf(square ? rule.side : rule.rows, config);
      const m = sizeOf(square ? rule.side : rule.cols, config);
      const shape = square ? `a ${n} x ${n} map (one row and column per item of '${rule.side}')`
        : `a ${n} x ${m} map (rows: '${rule.rows}', columns: '${rule.cols}')`;
      must(isList(value) && value.length > 0, "a non-empty [layer][head][query][key] list");
      value.forEach((layer, i) => {
        if (!isList(layer) || layer.length === 0) {
          fail(`${path}[${i}] must be a non-empty list of heads, got ${describeValue(layer)}`);
        }
        layer.forEach((map, j) => {
          if (!isList(map) || map.length !== n || map.some((row) => !isList(row) || row.length !== m)) {
            fail(`${path}[${i}][${j}] must be ${shape}, got ${describeValue(map)}`);
          }
        });
      });
      return;
    }
    case "head_mask": {
      const maps = config[rule.like];
      must(isList(value) && value.length === maps.length, `a list of ${maps.length} rows, one per layer of '${rule.like}'`);
      value.forEach((row, l) => {
        if (!isList(row) || row.length !== maps[l].length) {
          fail(`${path}[${l}] must be a list of ${maps[l].length} values, one per head of '${rule.like}'[${l}], ` +
            `got ${describeValue(row)}`);
        }
        row.forEach((v, h) => {
          if (!(v === 0 || v === 1 || typeof v === "boolean")) fail(`${path}[${l}][${h}] must be 0, 1 or a boolean, got ${describeValue(v)}`);
        });
      });
      return;
    }
    case "per_item":
      must(isObject(value), "an object");
      for (const name of config[rule.of]) checkRule(value[name], rule.value, `${path}['${name}']`, config, fail);
      return;
    default:
      throw new Error(`view_contract.json: unknown rule type ${JSON.stringify(rule.type)} at ${path}`);
  }
}

/**
 * Check the configuration of a view (and its model, when given) against view_contract.json.
 * @param {string} view     "sentence", "toy-compare" or "prune"
 * @param {*} config        the parsed data-config
 * @param {string} [model]  the element's data-model (not checked when absent)
 * @returns {object} config
 * @throws {Error} `data-config of a "prune" view: 'texts' must be a list of at least 4 items (2*num_anchors), got …`
 */
export function checkConfig(view, config, model = undefined, contract = VIEW_CONTRACT) {
  const fail = (what) => {
    throw new Error(`data-config of a "${view}" view: ${what}`);
  };
  const spec = Object.hasOwn(contract.views, view) ? contract.views[view] : null;
  if (!spec) fail(`unknown view "${view}"`);
  if (!isObject(config)) fail("not a JSON object");
  for (const [key, rule] of Object.entries(spec.keys)) {
    if (!(rule.optional && config[key] === undefined)) checkRule(config[key], rule, `'${key}'`, config, fail);
  }
  if (model !== undefined) {
    if (spec.model.equals !== undefined && model !== spec.model.equals) {
      fail(`model must be ${JSON.stringify(spec.model.equals)}, got ${describeValue(model)}`);
    }
    if (spec.model.one_of !== undefined && !config[spec.model.one_of].includes(model)) {
      fail(`model must be one of '${spec.model.one_of}' [${quoted(config[spec.model.one_of])}], got ${describeValue(model)}`);
    }
  }
  return config;
}
