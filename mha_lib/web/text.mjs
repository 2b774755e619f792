// text.mjs -- the texts the views show, as pure functions (sizes, labels, the readout), in the page's language.

import { pageLanguage, t } from "./i18n.mjs";

/** Bytes as megabytes for people: "22.4 MB" (one decimal), "0.3 MB"; below 50 kB in kilobytes ("2 kB"). */
export function formatMB(bytes) {
  return bytes > 0 && bytes < 5e4 ? `${Math.max(1, Math.round(bytes / 1e3))} kB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

const NUMBER_WORDS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];

/**
 * What the first action downloads, in words: "the model (22.4 MB) and the runtime (14.2 MB)",
 * "the four models (0.9 MB)"; models or runtime already loaded by another view are left out.
 * @param {number} models        how many model files are still to download (0 when all are loaded)
 * @param {number} modelBytes    their total size in bytes
 * @param {number|null} runtime  bytes of the runtime still to download; 0 or null when loaded or unknown
 * @returns {string} "" when nothing is left to download
 */
export function downloadText(models, modelBytes, runtime) {
  const size = formatMB(modelBytes);
  const count = pageLanguage() === "zh" ? models : NUMBER_WORDS[models] || models; // Chinese writes the digits
  const model = models === 1 ? t("the model ({size})", { size }) : models > 1 ? t("the {count} models ({size})", { count, size }) : "";
  const engine = runtime ? t("the runtime ({size})", { size: formatMB(runtime) }) : "";
  return model && engine ? t("{models} and {runtime}", { models: model, runtime: engine }) : model || engine;
}

/**
 * What the first action downloads for a model split by layer, in words: "the runtime (14.2 MB) and what the model's
 * first maps need (1.3 MB), then its other layers (21.4 MB) as they are computed" (no runtime: without it).
 */
export function layeredDownloadText(firstBytes, otherBytes, runtime) {
  const words = { first: formatMB(firstBytes), rest: formatMB(otherBytes), runtime: formatMB(runtime) };
  return runtime ? t("the runtime ({runtime}) and what the model's first maps need ({first}), then its other layers " +
    "({rest}) as they are computed", words)
    : t("what the model's first maps need ({first}), then its other layers ({rest}) as they are computed", words);
}

/** How many layers, in words: "1 layer", "6 layers". */
export function layersText(n) {
  return n > 1 ? t("{n} layers", { n }) : t("{n} layer", { n });
}

/** How many heads, in words: "1 head", "12 heads". */
export function headsText(n) {
  return n > 1 ? t("{n} heads", { n }) : t("{n} head", { n });
}

/** What went wrong, in words: an Error's message, or the thrown value itself. */
export function errorText(err) {
  return err?.message ? err.message : String(err);
}

/**
 * The sentence view's caption, "The maps of “The cat sat.”": a text that ends its own sentence (. ! ? or their
 * Chinese forms) takes no second period after the closing quote; any other text does ("The maps of “a cat”.").
 */
export function mapsOfText(text) {
  return /[.!?。！？]$/.test(text) ? t("The maps of “{text}”", { text }) : t("The maps of “{text}”.", { text });
}

/** A token as a short label: long tokens are cut with "…" (the readout shows them whole). */
export function shortLabel(token, max = 12) {
  const chars = Array.from(String(token));
  return chars.length <= max ? chars.join("") : `${chars.slice(0, max - 1).join("")}…`;
}
/** The readout of one cell: which head, which query and key token (keys: the column labels), the weight. */
export function readoutText(label, tokens, query, key, weight, keys = tokens) {
  return t("{label}: query “{query}” (position {q}) → key “{key}” (position {k}): weight {weight}",
    { label, query: tokens[query], q: query, key: keys[key], k: key, weight: weight.toFixed(3) });
}
/** What the model reads of a text longer than its limit: the whole text stays in the box. */
export function truncationText(text, fullLength, kept) {
  return t("Your text ({chars} characters) has {tokens} tokens; the model reads at most {kept}, so the maps are of its " +
    "first {kept} tokens only. The box keeps your whole text.", { chars: Array.from(text).length.toLocaleString("en-US"),
    tokens: fullLength.toLocaleString("en-US"), kept });
}
/**
 * What the model could not read: "" when no token is [UNK], else a sentence to append (after a space in English):
 * how many are and why (MiniLM's WordPiece vocabulary is English: most Chinese characters, many emoji and rare
 * scripts have no piece in it).
 * @param {string[]} tokens  the model's tokens, [CLS] and [SEP] included
 */
export function unknownText(tokens) {
  const unknown = tokens.filter((token) => token === "[UNK]").length;
  if (!unknown) return "";
  const pieces = tokens.filter((token) => token !== "[CLS]" && token !== "[SEP]").length;
  const space = pageLanguage() === "zh" ? "" : " "; // Chinese needs no space after "。"
  return space + (unknown === 1
    ? t("{unknown} of its {pieces} word pieces is [UNK]: the model's vocabulary is English, so it cannot tell those " +
      "characters apart (they all become the same unknown token).", { unknown, pieces })
    : t("{unknown} of its {pieces} word pieces are [UNK]: the model's vocabulary is English, so it cannot tell those " +
      "characters apart (they all become the same unknown token).", { unknown, pieces }));
}

/**
 * Model ids for people: training checkpoints of one model (mha_lib.live.checkpoint_id, "name.stepN") become
 * "name at 12 training checkpoints (steps 0 to 2,000)"; other ids stay as they are.
 * @param {string[]} ids
 * @returns {string} the ids, joined by ", "
 */
export function modelsText(ids) {
  const groups = new Map(); // name -> steps, in order of first appearance; a plain id is its own group
  for (const id of ids) {
    const m = /^(.+)\.step(\d+)$/.exec(id);
    const key = m ? m[1] : id;
    if (!groups.has(key)) groups.set(key, []);
    if (m) groups.get(key).push(Number(m[2]));
  }
  const number = (n) => n.toLocaleString("en-US");
  return [...groups].map(([name, steps]) => (steps.length > 1
    ? t("{name} at {count} training checkpoints (steps {first} to {last})",
      { name, count: steps.length, first: number(Math.min(...steps)), last: number(Math.max(...steps)) })
    : steps.length ? t("{name} after {steps} steps", { name, steps: steps[0] }) : name)).join(t(", "));
}
