// Tests of the live views' two languages (i18n.mjs, i18n_zh.mjs). Run: node --test mha_lib/web/test/
//
// Every text a view shows goes through t("English text", values); the Chinese catalog is keyed by that English
// text. These tests read the modules' source: each t(...) takes one literal (a string, or strings joined by +),
// the catalog holds exactly the literals the modules use, and each translation keeps its key's placeholders.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { pageLanguage, sentences, t } from "../i18n.mjs";
import { ZH } from "../i18n_zh.mjs";
import { downloadText, mapsOfText, unknownText } from "../text.mjs";

const WEB = new URL("..", import.meta.url);
const MODULES = fs.readdirSync(WEB).filter((f) => f.endsWith(".mjs") && !f.startsWith("i18n")).sort();

/**
 * The first argument of every call t(...) in `source`: {text, line} where it is a literal, {error, line} where
 * it is not (a variable, a template with ${...}, an expression).
 */
function tCalls(source) {
  const calls = [];
  const call = /(?<![\w$.])t\(/g;
  for (let m = call.exec(source); m; m = call.exec(source)) {
    const line = source.slice(0, m.index).split("\n").length;
    let i = call.lastIndex;
    const pieces = [];
    for (;;) {
      while (/\s/.test(source[i])) i++;
      const quote = source[i];
      if (quote !== '"' && quote !== "`") break;
      let j = i + 1;
      while (source[j] !== quote) j += source[j] === "\\" ? 2 : 1;
      pieces.push(source.slice(i, j + 1));
      i = j + 1;
      while (/\s/.test(source[i])) i++;
      if (source[i] !== "+") break;
      i++;
    }
    const literal = pieces.length > 0 && (source[i] === "," || source[i] === ")") && !pieces.some((p) => p.includes("${"));
    calls.push(literal ? { text: pieces.map((p) => Function(`"use strict"; return ${p};`)()).join(""), line }
      : { error: source.slice(m.index, m.index + 60).split("\n")[0], line });
  }
  return calls;
}

const placeholders = (text) => [...new Set([...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]))].sort();

const used = new Map(); // English text -> "file:line" of its first use
for (const file of MODULES) {
  for (const c of tCalls(fs.readFileSync(new URL(file, WEB), "utf8"))) {
    if (c.text !== undefined && !used.has(c.text)) used.set(c.text, `${file}:${c.line}`);
  }
}

test("every t() of the modules takes a literal English text (the catalog's key), never a value computed", () => {
  assert.ok(used.size > 100, `only ${used.size} texts found`);
  for (const file of MODULES) {
    const bad = tCalls(fs.readFileSync(new URL(file, WEB), "utf8")).filter((c) => c.error);
    assert.deepEqual(bad, [], `${file}: t() with no literal first argument`);
  }
});

test("every English text of a t() has its Chinese in the catalog", () => {
  const missing = [...used].filter(([text]) => !Object.hasOwn(ZH, text)).map(([text, where]) => `${where}: ${text}`);
  assert.deepEqual(missing, []);
});

test("the catalog holds no text that no t() uses", () => {
  assert.deepEqual(Object.keys(ZH).filter((text) => !used.has(text)), []);
});

test("each Chinese text has exactly the placeholders of its English key, and is written as Chinese", () => {
  const cjk = "\\u3400-\\u9fff";
  for (const [english, chinese] of Object.entries(ZH)) {
    assert.equal(typeof chinese, "string", english);
    assert.ok(chinese.trim(), `empty translation of ${english}`);
    assert.deepEqual(placeholders(chinese), placeholders(english), `placeholders of ${JSON.stringify(english)}`);
    // full-width punctuation after Chinese; a space between Chinese and Latin letters or digits
    assert.doesNotMatch(chinese, new RegExp(`[${cjk}][,;:!?()]`), `ASCII punctuation in ${JSON.stringify(chinese)}`);
    assert.doesNotMatch(chinese, new RegExp(`[${cjk}][A-Za-z0-9\\[]|[A-Za-z0-9\\]][${cjk}]`),
      `no space between Chinese and Latin in ${JSON.stringify(chinese)}`);
  }
});

test("t(): English without a page or on an English page, Chinese where <html lang> starts with zh", () => {
  const key = "Recomputed {where} in {ms} ms.";
  assert.equal(pageLanguage(), "en");
  assert.equal(t(key, { where: "in your browser", ms: 12 }), "Recomputed in your browser in 12 ms.");
  assert.equal(t("not in the catalog {x}", { x: 1 }), "not in the catalog 1");
  assert.equal(t("{kept} stays {kept}", {}), "{kept} stays {kept}"); // a placeholder without a value stays
  assert.equal(t("{a}", null), "{a}"); // never throws
  const saved = Object.getOwnPropertyDescriptor(globalThis, "document");
  try {
    for (const [lang, zh] of [["en", false], ["en-GB", false], ["", false], ["zh-CN", true], ["zh", true], ["ZH-hans", true]]) {
      globalThis.document = { documentElement: { lang } };
      assert.equal(pageLanguage(), zh ? "zh" : "en", lang);
      assert.equal(t(key, { where: zh ? "在你的浏览器中" : "in your browser", ms: 12 }),
        zh ? "已在你的浏览器中重新计算，用时 12 毫秒。" : "Recomputed in your browser in 12 ms.", lang);
    }
    globalThis.document = { documentElement: { lang: "zh-CN" } };
    assert.equal(t("not in the catalog {x}", { x: 1 }), "not in the catalog 1"); // English where no Chinese is
    assert.equal(t("token {i} is {token}, not a number in 0..{last}", { i: 3, token: '"abc"', last: 9 }),
      "第 3 个词元是 “abc”，不是 0..9 中的数"); // a quoted value in Chinese quotes
    assert.equal(t("aligned {weight}", { weight: "0.83" }), "对齐词上的权重 0.83");
    assert.equal(sentences("第一句。", "", "第二句。"), "第一句。第二句。");
    assert.equal(downloadText(4, 0.9e6, 14.2e6), "全部 4 个模型（0.9 MB）和运行时（14.2 MB）");
    assert.equal(unknownText(["[CLS]", "[UNK]", "[UNK]", "把", "[SEP]"]).startsWith("其中"), true);
    assert.equal(mapsOfText("The cat sat."), "“The cat sat.”的注意力图。");
    assert.equal(mapsOfText("a cat"), "“a cat”的注意力图。");
  } finally {
    if (saved) Object.defineProperty(globalThis, "document", saved);
    else delete globalThis.document;
  }
  assert.equal(t("token {i} is {token}, not a number in 0..{last}", { i: 3, token: '"abc"', last: 9 }),
    'token 3 is "abc", not a number in 0..9');
  assert.equal(sentences("One.", "", "Two."), "One. Two.");
  // the caption's period: one, whether or not the quoted text ends its own sentence
  assert.equal(mapsOfText("The animal … too tired."), "The maps of “The animal … too tired.”");
  assert.equal(mapsOfText("Is it?"), "The maps of “Is it?”");
  assert.equal(mapsOfText("小明不饿了。"), "The maps of “小明不饿了。”");
  assert.equal(mapsOfText("a cat"), "The maps of “a cat”.");
  assert.equal(mapsOfText("cut short…"), "The maps of “cut short…”.");
  assert.equal(downloadText(4, 0.9e6, 14.2e6), "the four models (0.9 MB) and the runtime (14.2 MB)");
});
