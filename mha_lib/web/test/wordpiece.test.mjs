// Tests of mha_lib/web/wordpiece.mjs. Run: node --test mha_lib/web/test/
//
// The cases that compare with mha_lib read ./fixture.mjs: a JSON file that tests/test_web.py writes at
// test time, or that tools/web_fixture.py makes when node runs alone (texts with the ids mha_lib's
// tokenizer gives them, and tokenizers' words for a sweep over every code point).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { fixture } from "./fixture.mjs";
import { WordPieceTokenizer, hasWords, normalize, preTokenize } from "../wordpiece.mjs";


// A toy vocabulary: ids are the indices.
const TOY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "aff", "!", "the", "日", "##s", "cafe"];

test("greedy longest match, ## continuation pieces, [UNK] for an uncovered word", () => {
  const tok = new WordPieceTokenizer(TOY);
  assert.deepEqual(tok.tokenize("unaffable the"), ["un", "##aff", "##able", "the"]);
  assert.deepEqual(tok.tokenize("unaffablex"), ["[UNK]"]); // one piece missing: the whole word
  assert.deepEqual(tok.tokenize("Café!"), ["cafe", "!"]); // accent stripped, lower-cased, punctuation split
  assert.deepEqual(tok.tokenize("the日the"), ["the", "日", "the"]); // CJK gets spaces around it
});

test("special tokens typed in the text stay whole; lower-case ones do not", () => {
  const tok = new WordPieceTokenizer(TOY);
  assert.deepEqual(tok.tokenize("the[MASK]the"), ["the", "[MASK]", "the"]);
  assert.deepEqual(tok.tokenize("[mask]"), ["[UNK]", "[UNK]", "[UNK]"]); // "[", "mask", "]" are not in TOY
});

test("words over 100 characters are one [UNK]", () => {
  const vocab = [...TOY, "a", "##a"];
  const tok = new WordPieceTokenizer(vocab);
  assert.equal(tok.tokenize("a".repeat(100)).length, 100);
  assert.deepEqual(tok.tokenize("a".repeat(101)), ["[UNK]"]);
});

test("encode adds [CLS]/[SEP] and truncates to maxLength with a flag", () => {
  const tok = new WordPieceTokenizer(TOY, { maxLength: 5 });
  const short = tok.encode("the the");
  assert.deepEqual(short.tokens, ["[CLS]", "the", "the", "[SEP]"]);
  assert.deepEqual(short.ids, [2, 10, 10, 3]);
  assert.equal(short.truncated, false);
  const long = tok.encode("the the the the the");
  assert.deepEqual(long.tokens, ["[CLS]", "the", "the", "the", "[SEP]"]);
  assert.equal(long.truncated, true);
  assert.equal(long.fullLength, 7);
  assert.deepEqual(tok.encode("").tokens, ["[CLS]", "[SEP]"]);
});

test("normalisation: controls dropped, whitespace kept as spaces, one code point lower-cased at a time", () => {
  assert.equal(normalize("a\u0000b\u200bc\td"), "abc d");
  assert.equal(normalize("ΟΔΟΣ"), "οδοσ"); // no final sigma
  assert.deepEqual(preTokenize("hi,there  you"), ["hi", ",", "there", "you"]);
});

test("hasWords: a text of invisible characters is empty, as the tokenizer sees it", () => {
  for (const text of ["", "   ", "\u200b\u200b", "\u0000", "\ufeff", "\u200b \ufeff\t\n", "\u0301"]) {
    assert.equal(hasWords(text), false, JSON.stringify(text));
  }
  for (const text of ["a", " . ", "\u200bcat", "日"]) assert.equal(hasWords(text), true, JSON.stringify(text));
});

test("bad arguments are refused", () => {
  assert.throws(() => new WordPieceTokenizer([]), /non-empty/);
  assert.throws(() => new WordPieceTokenizer(["a"]), /\[PAD\]/);
  assert.throws(() => new WordPieceTokenizer(TOY, { maxLength: 1 }), /maxLength/);
  assert.throws(() => new WordPieceTokenizer(TOY).tokenize(3), /string/);
});

test("ids equal mha_lib's WordPieceTokenizer on every fixture text", () => {
  const tok = WordPieceTokenizer.fromVocabText(fs.readFileSync(fixture.vocab, "utf8"), { maxLength: fixture.max_length });
  assert.ok(fixture.cases.length >= 200);
  const failures = [];
  for (const c of fixture.cases) {
    const got = tok.encode(c.text);
    const same = JSON.stringify(got.ids) === JSON.stringify(c.ids) && got.truncated === c.truncated
      && JSON.stringify(got.tokens) === JSON.stringify(c.tokens);
    if (!same) failures.push({ text: c.text, expected: c.tokens, got: got.tokens });
  }
  assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${fixture.cases.length} texts differ`);
});

test("normaliser and pre-tokeniser equal tokenizers' on every code point of the sweep", () => {
  const words = preTokenize(normalize(fixture.sweep.text));
  const expected = fixture.sweep.words;
  const n = Math.max(words.length, expected.length);
  for (let i = 0; i < n; i++) {
    if (words[i] !== expected[i]) {
      const show = (w) => (w === undefined ? "(none)" : Array.from(w).map((c) => `U+${c.codePointAt(0).toString(16)}`).join(" "));
      assert.fail(`word ${i} differs: tokenizers ${show(expected[i])}, wordpiece.mjs ${show(words[i])}`);
    }
  }
});
