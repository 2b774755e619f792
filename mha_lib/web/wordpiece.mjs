// wordpiece.mjs -- BERT's WordPiece tokenizer, giving the ids of mha_lib.pretrained.WordPieceTokenizer.
//
// mha_lib tokenizes with Hugging Face `tokenizers` and the checkpoint's tokenizer.json
// (all-MiniLM-L6-v2: BertNormalizer with lowercase, BertPreTokenizer, WordPiece). This module
// does the same steps, in the same order, in plain JavaScript:
//
//   1. special tokens: "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]" typed in the text are kept
//      whole (tokenizers matches them on the raw text, before any normalisation);
//   2. normalise each other piece (tokenizers' BertNormalizer): drop NUL, U+FFFD and control
//      characters, turn whitespace into " ", put spaces around CJK ideographs, strip accents
//      (NFD, then drop non-spacing marks), lower-case one code point at a time;
//   3. pre-tokenise (BertPreTokenizer): split on whitespace, and cut every punctuation mark
//      into a word of its own;
//   4. WordPiece (Wu et al. 2016; Devlin et al. 2019): greedy longest match from the left,
//      later pieces prefixed "##"; a word with no match, or longer than 100 characters, is
//      one "[UNK]";
//   5. "[CLS]" + pieces + "[SEP]", cut to maxLength tokens (256 for all-MiniLM-L6-v2, as
//      mha_lib: sentence-transformers' max_seq_length), with a flag saying it was cut.
//
// Unicode tables. tokenizers 0.23 decides "control", "non-spacing mark" and "punctuation" with
// the Rust crate unicode_categories and decomposes with a fork of unicode-normalization, whose
// tables are older than a browser's: to tokenizers, a character that Unicode assigned since is
// unassigned -- kept as it is, never decomposed, lower-cased or split off. OLD_UNICODE (at the
// end of this file) lists those characters, and the four whose category changed since; it was
// found by running every code point through both (tests/test_web.py prints it again, and its
// sweep over every code point fails when it is out of date).

const SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
const MAX_WORD_CHARS = 100; // tokenizer.json: model.max_input_chars_per_word

// The CJK ideograph blocks of tokenizers' BertNormalizer (is_chinese_char).
const CJK_RANGES = [
  [0x4e00, 0x9fff], [0x3400, 0x4dbf], [0x20000, 0x2a6df], [0x2a700, 0x2b73f],
  [0x2b740, 0x2b81f], [0x2b920, 0x2ceaf], [0xf900, 0xfaff], [0x2f800, 0x2fa1f],
];

const WHITESPACE = /[\t\n\r\p{White_Space}]/u; // Rust's char::is_whitespace, plus \t \n \r
const CONTROL = /[\p{Cc}\p{Cf}\p{Co}]/u; // deleted by clean_text (unassigned code points are kept)
const MARK_NONSPACING = /\p{Mn}/u;
const PUNCTUATION = /[\p{P}!-/:-@[-`{-~]/u; // Unicode P* or ASCII punctuation (e.g. "$", "+")

/** True when code point `cp` is one of the CJK ideographs that get spaces around them. */
export function isCjk(cp) {
  return CJK_RANGES.some(([lo, hi]) => cp >= lo && cp <= hi);
}

/** tokenizers' clean_text: is this character deleted? (NUL, U+FFFD, Cc, Cf, Co; not \t \n \r) */
export function isDeleted(ch) {
  const cp = ch.codePointAt(0);
  if (cp === 0 || cp === 0xfffd) return true;
  if (ch === "\t" || ch === "\n" || ch === "\r" || isUnassignedForTokenizers(cp)) return false;
  return CONTROL.test(ch);
}

/** BertPreTokenizer's punctuation: ASCII punctuation or a Unicode punctuation category. */
export function isPunctuation(ch) {
  const cp = ch.codePointAt(0);
  if (isUnassignedForTokenizers(cp)) return false;
  return PUNCTUATION.test(ch) || inRanges(OLD_UNICODE.punctuation, cp);
}

/** A non-spacing mark (category Mn) to tokenizers: removed with the accents. */
export function isStrippedMark(ch) {
  const cp = ch.codePointAt(0);
  if (inRanges(OLD_UNICODE.nonspacing, cp)) return true;
  return MARK_NONSPACING.test(ch) && !inRanges(OLD_UNICODE.punctuation, cp);
}

/** Code points unassigned in tokenizers' tables: they pass through untouched. */
export function isUnassignedForTokenizers(cp) {
  return inRanges(OLD_UNICODE.unassigned, cp);
}

/**
 * Normalise one piece of text as tokenizers' BertNormalizer(lowercase=true) does.
 * @param {string} text
 * @returns {string}
 */
export function normalize(text) {
  // 1. clean_text and handle_chinese_chars, one code point at a time. The text is cut into
  //    runs: `plain` runs go through steps 2-3, `kept` runs (characters that tokenizers'
  //    tables do not know) stay as they are.
  const runs = [{ plain: true, text: "" }];
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    const plain = !isUnassignedForTokenizers(cp);
    if (plain && isDeleted(ch)) continue;
    if (runs[runs.length - 1].plain !== plain) runs.push({ plain, text: "" });
    const run = runs[runs.length - 1];
    if (!plain) run.text += ch;
    else if (WHITESPACE.test(ch)) run.text += " ";
    else if (isCjk(cp)) run.text += ` ${ch} `;
    else run.text += ch;
  }
  let out = "";
  for (const run of runs) {
    if (!run.plain) {
      out += run.text;
      continue;
    }
    // 2. strip accents: canonical decomposition, then drop the non-spacing marks;
    // 3. lower-case one code point at a time (no final-sigma rule, as Rust's char::to_lowercase).
    for (const ch of run.text.normalize("NFD")) {
      if (isStrippedMark(ch)) continue;
      out += ch.toLowerCase();
    }
  }
  return out;
}

/**
 * Split normalised text into words: whitespace separates, punctuation is a word of its own.
 * @param {string} text  normalised text
 * @returns {string[]}
 */
export function preTokenize(text) {
  const words = [];
  let word = "";
  for (const ch of text) {
    if (WHITESPACE.test(ch)) {
      if (word) words.push(word);
      word = "";
    } else if (isPunctuation(ch)) {
      if (word) words.push(word);
      words.push(ch);
      word = "";
    } else {
      word += ch;
    }
  }
  if (word) words.push(word);
  return words;
}

/**
 * Whether `text` holds anything the tokenizer keeps: after its cleaning (controls, format characters
 * such as U+200B and U+FEFF, NUL) and normalisation, at least one word. The views call a text
 * without any empty, whichever invisible characters it is made of.
 */
export function hasWords(text) {
  return preTokenize(normalize(text)).length > 0;
}

export class WordPieceTokenizer {
  /**
   * @param {string[]} vocab  the token strings, index = id (vocab.txt, one a line)
   * @param {{maxLength?: number}} [options]  maxLength: tokens kept, [CLS] and [SEP] included
   */
  constructor(vocab, { maxLength = 256 } = {}) {
    if (!Array.isArray(vocab) || vocab.length === 0) throw new Error("vocab must be a non-empty array of strings");
    if (!Number.isInteger(maxLength) || maxLength < 2) throw new Error(`maxLength must be an integer >= 2, got ${maxLength}`);
    this.vocab = vocab;
    this.maxLength = maxLength;
    this.ids = new Map(); // token -> id, filled in a plain loop (30,522 entries: no array per entry)
    for (let id = 0; id < vocab.length; id++) this.ids.set(vocab[id], id);
    for (const token of SPECIAL) {
      if (!this.ids.has(token)) throw new Error(`the vocabulary has no ${token}`);
    }
  }

  /** Build from the text of vocab.txt (one token a line, the line number is the id). */
  static fromVocabText(text, options) {
    // a line's final "\r" (Windows line ends) is not part of its token; most files have none
    const lines = (text.includes("\r") ? text.replace(/\r$/gm, "") : text).split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop(); // the file's final newline
    return new WordPieceTokenizer(lines, options);
  }

  /** WordPiece pieces of one word (greedy longest match); ["[UNK]"] when it cannot be covered. */
  wordPieces(word) {
    const chars = Array.from(word); // code points, so an emoji is one character
    if (chars.length > MAX_WORD_CHARS) return ["[UNK]"];
    const pieces = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let found = null;
      while (start < end) {
        const piece = (start > 0 ? "##" : "") + chars.slice(start, end).join("");
        if (this.ids.has(piece)) {
          found = piece;
          break;
        }
        end -= 1;
      }
      if (found === null) return ["[UNK]"];
      pieces.push(found);
      start = end;
    }
    return pieces;
  }

  /** Token strings of a text, without [CLS]/[SEP] and without truncation. */
  tokenize(text) {
    if (typeof text !== "string") throw new Error(`tokenize takes a string, got ${typeof text}`);
    const tokens = [];
    // A capture group keeps the special tokens in split()'s output, at odd indices.
    const parts = text.split(/(\[(?:PAD|UNK|CLS|SEP|MASK)\])/);
    parts.forEach((part, i) => {
      if (i % 2 === 1) tokens.push(part);
      else for (const word of preTokenize(normalize(part))) tokens.push(...this.wordPieces(word));
    });
    return tokens;
  }

  /**
   * Encode one text as the model reads it.
   * @param {string} text
   * @returns {{ids: number[], tokens: string[], truncated: boolean, fullLength: number}}
   *   ids and tokens: "[CLS]", the pieces, "[SEP]" (at most maxLength); fullLength: the
   *   length before truncation, [CLS] and [SEP] included.
   */
  encode(text) {
    const pieces = this.tokenize(text);
    const fullLength = pieces.length + 2;
    const kept = pieces.slice(0, Math.max(0, this.maxLength - 2));
    const tokens = ["[CLS]", ...kept, "[SEP]"];
    return {
      ids: tokens.map((t) => this.ids.get(t)),
      tokens,
      truncated: kept.length < pieces.length,
      fullLength,
    };
  }
}

// Where tokenizers 0.23's Unicode tables differ from Unicode 17's (Node 20, Chromium 156):
// ranges [first, last] of code points, inclusive (printed by `python tests/test_web.py`).
const OLD_UNICODE = {
  // unassigned to tokenizers (or, within a range, behaving as if unassigned either way)
  unassigned: [
    [0x61d, 0x61d], [0x7fd, 0x7fd], [0x890, 0x8e2], [0x9fd, 0x9fe], [0xa76, 0xa76], [0xafa, 0xaff],
    [0xb55, 0xb55], [0xc04, 0xc3c], [0xc77, 0xc77], [0xc84, 0xc84], [0xd00, 0xd00], [0xd3b, 0xd3c],
    [0xd81, 0xd81], [0xeba, 0xeba], [0xece, 0xece], [0x180f, 0x1886], [0x1abf, 0x1aeb], [0x1b4e, 0x1b4f],
    [0x1b7d, 0x1b7f], [0x1df6, 0x1dfb], [0x2e43, 0x2e5d], [0xa82c, 0xa82c], [0xa8c5, 0xa8c5], [0xa8ff, 0xa8ff],
    [0xa9bd, 0xa9bd], [0x105c9, 0x105e4], [0x10d24, 0x10d27], [0x10d69, 0x10f89], [0x11070, 0x11074], [0x110c2, 0x110cd],
    [0x111cf, 0x111cf], [0x1123e, 0x11241], [0x1133b, 0x1133b], [0x11383, 0x1145e], [0x11660, 0x1166c], [0x116b9, 0x116b9],
    [0x1182f, 0x1183b], [0x11938, 0x11fff], [0x12ff1, 0x1612f], [0x16d68, 0x16d6f], [0x16e97, 0x16e9a], [0x16f4f, 0x16f4f],
    [0x16fe2, 0x16fe4], [0x1cf00, 0x1cf46], [0x1e000, 0x1e6f5], [0x1e944, 0x1e95f],
  ],
  punctuation: [[0x166d, 0x166d], [0x111c9, 0x111c9]], // punctuation to tokenizers, no longer
  nonspacing: [[0x1734, 0x1734], [0x1171e, 0x1171e]], // non-spacing marks to tokenizers, no longer
};

function inRanges(ranges, cp) {
  return ranges.some(([lo, hi]) => cp >= lo && cp <= hi);
}
