// i18n.mjs -- the words of the live views in the page's language: English, or Simplified Chinese on the
// pages of the book's Chinese edition (<html lang="zh-CN">), which load these same modules.
//
// Every text a view shows goes through t(english, values): `english` is the text exactly as the English
// book shows it, with {name} placeholders that `values` fills; the Chinese catalog (i18n_zh.mjs) is keyed
// by that English text, so the views stay readable in English where each text is used. A text the
// catalog lacks shows in English. mha_lib/web/test/i18n.test.mjs checks the catalog against every
// literal t("...") of the modules (none missing, none unused, the same placeholders).

import { ZH } from "./i18n_zh.mjs";

/** "zh" where the page's <html lang> starts with "zh", else "en" (also without a page: node, tests). Read on every call. */
export function pageLanguage() {
  const root = typeof document === "object" && document ? document.documentElement : null;
  return root && String(root.lang || "").toLowerCase().startsWith("zh") ? "zh" : "en";
}

/**
 * The text for the page's language, its {name} placeholders filled from `values` (a placeholder without a
 * value stays as it is). t("Recomputed {where} in {ms} ms.", {where, ms: 12}).
 * @param {string} english  the English text: the catalog's key
 * @param {Object<string, *>} [values]
 * @returns {string}
 */
export function t(english, values = {}) {
  const zh = pageLanguage() === "zh";
  const text = zh && Object.hasOwn(ZH, english) ? ZH[english] : english;
  // a value quoted "like this" (checks.mjs's describeValue) is quoted “like this” in Chinese
  const fill = (v) => (zh && /^"[^"]*"$/.test(v) ? `“${v.slice(1, -1)}”` : v);
  return text.replace(/\{(\w+)\}/g, (whole, name) => (values && Object.hasOwn(values, name) ? fill(String(values[name])) : whole));
}

/** Sentences joined as the language writes them: a space between them in English, none in Chinese (they end in "。"). */
export function sentences(...texts) {
  return texts.filter((x) => x).join(pageLanguage() === "zh" ? "" : " ");
}
