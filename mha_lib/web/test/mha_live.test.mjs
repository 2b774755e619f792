// Tests of the pure parts of the live views' modules in mha_lib/web/ (no DOM, no network). Run: node --test mha_lib/web/test/
//
// The cases marked "mha_lib" compare with what mha_lib computes (./fixture.mjs: written by tests/test_web.py,
// or made by tools/web_fixture.py when node runs alone).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { fixture } from "./fixture.mjs";
import { KernelTensor, kernelBackend } from "../runtime_kernel.mjs";
import { fetchTokenRows, getManifest, licenceParts } from "../runtime_browser.mjs";
import { URLS } from "../ort_runtime.mjs";
import { CALL_POSITIONS, lengthGroups, paraphraseScores, runBert } from "../compute_bert.mjs";
import { VIRIDIS, colourOf, greyOf, gridLayout, largestWeight, rowEnd, zoomLayout } from "../layout.mjs";
import {
  argmaxRows, attentionsFromOutput, checkFinite, markedTokens, median, prevMarkedLabels, seededFloats, tokenRowFeeds,
} from "../compute.mjs";
import { clsRollout, copyablePositions, digitReadings, inductionReadings, translationReadings } from "../compute_toys.mjs";
import { timingSvg, timingVerdict } from "../view_timing.mjs";
import { Clock } from "../clock.mjs";
import { speedInput } from "../speed.mjs";
import { parseSource, wordName } from "../view_translate.mjs";
import { parseSequence, repeatedSequence } from "../view_induction.mjs";
import { checkConfig } from "../contract.mjs";
import { arrayFlaw, checkArray, checkDigitInput, checkHeadMask, checkToyInput, describeValue } from "../checks.mjs";
import { downloadText, formatMB, modelsText, readoutText, shortLabel, truncationText, unknownText } from "../text.mjs";
import { SVG_RECT_CELLS, csvField, escapeXml, figureCsv, figureLayout, figureSvg, fileName } from "../figure.mjs";
import { setText } from "../dom.mjs";
import { checkDigest, sha256Hex, sha256Of } from "../integrity.mjs";
import { onnxMetadata } from "../onnx_file.mjs";
import { headsOf, rolesOf } from "../layer_maps.mjs";
import * as compute from "../compute.mjs";
import { createHash } from "node:crypto";

const sha = (bytes) => createHash("sha256").update(bytes).digest("hex");


test("colour scale: viridis ends, monotone lightness, clipped, grey for heads turned off", () => {
  assert.deepEqual(colourOf(0, 1), VIRIDIS[0]);
  assert.deepEqual(colourOf(1, 1), VIRIDIS[16]);
  assert.deepEqual(colourOf(0.5, 0.5), VIRIDIS[16]); // the top of the scale is vmax, not 1
  assert.deepEqual(colourOf(7, 1), VIRIDIS[16]);
  assert.deepEqual(colourOf(-1, 1), VIRIDIS[0]);
  assert.deepEqual(colourOf(NaN, 1), VIRIDIS[0]);
  const light = (c) => 0.3 * c[0] + 0.59 * c[1] + 0.11 * c[2];
  for (let i = 1; i <= 100; i++) assert.ok(light(colourOf(i / 100, 1)) >= light(colourOf((i - 1) / 100, 1)));
  const [r, g, b] = greyOf(0.3, 1);
  assert.ok(r === g && g === b);
  assert.equal(largestWeight([[[0.1, 0.7]], [[0.2, 0.3]]]), 0.7);
  assert.equal(largestWeight([]), 1);
});

test("grid layout: balanced rows, fits the column and a 390 px phone, whole-pixel cells", () => {
  for (const [width, count, length] of [[688, 12, 16], [358, 12, 16], [358, 72, 30], [1200, 1, 8], [300, 8, 256],
    [688, 4, 256], [40, 3, 3]]) {
    const g = gridLayout({ width, count, length });
    assert.ok(g.columns * g.map + (g.columns - 1) * 8 <= Math.max(40, width), `fits ${width}: ${JSON.stringify(g)}`);
    assert.ok(g.columns * g.rows >= count && (g.rows - 1) * g.columns < count, "no empty row");
    if (g.cell >= 4) assert.equal(g.map, g.cell * length);
    assert.ok(g.map <= 220);
  }
  assert.deepEqual(gridLayout({ width: 688, count: 12, length: 16 }), { columns: 4, rows: 3, map: 160, cell: 10 });
  assert.equal(gridLayout({ width: 358, count: 12, length: 16 }).columns, 3); // a phone: 3 columns of 4 rows
  assert.throws(() => gridLayout({ width: 300, count: 0, length: 5 }), /count/);
});

test("zoom layout: labels only when cells are big enough to read, never wider than the column", () => {
  const small = zoomLayout(358, 16, 40);
  assert.ok(small.labels && small.cell >= 9 && small.size <= 358);
  assert.ok(!small.scrolls);
  // 256 tokens: labelled 12 px cells in a box that scrolls, not 1.4 px cells that fit
  const long = zoomLayout(358, 256, 40);
  assert.ok(long.labels && long.scrolls && long.cell === 12 && long.size === long.margin + 12 * 256);
  const wide = zoomLayout(2000, 8, 30);
  assert.ok(wide.size <= 640 && wide.cell <= 32);
});

test("result shaping: one batch row of (layers, B, H, L, L) to [layer][head][query][key], padding cut", () => {
  const dims = [2, 3, 2, 4, 4];
  const data = new Float32Array(2 * 3 * 2 * 16).map((_, i) => i);
  const maps = attentionsFromOutput(data, dims, 1, 3);
  assert.equal(maps.length, 2);
  assert.equal(maps[0].length, 2);
  assert.equal(maps[0][0].length, 3);
  assert.equal(maps[0][0][0].length, 3);
  // element (l, b, h, q, k) sits at (((l*B + b)*H + h)*L + q)*L + k
  assert.equal(maps[1][1][2][1], (((1 * 3 + 1) * 2 + 1) * 4 + 2) * 4 + 1);
  assert.ok(Array.isArray(maps[0][0][0])); // plain arrays, JSON-able for tests
  assert.throws(() => attentionsFromOutput(data, dims, 3, 3), /row 3/);
  assert.throws(() => attentionsFromOutput(data, dims, 0, 5), /5 tokens/);
});

test("predictions: argmax per position and its softmax probability", () => {
  const logits = new Float32Array([0, 2, 1, 5, 5, -1]); // (L=2, C=3)
  const { predictions, confidence } = argmaxRows(logits, 2, 3);
  assert.deepEqual(predictions, [1, 0]); // a tie goes to the first class, as torch.argmax
  const e = [Math.exp(0), Math.exp(2), Math.exp(1)];
  assert.ok(Math.abs(confidence[0] - e[1] / (e[0] + e[1] + e[2])) < 1e-12);
});

test("chapter 1's labels and token labels", () => {
  const task = { vocab_size: 8, op: "sub" };
  assert.deepEqual(prevMarkedLabels([3, 5, 1, 7], [0, 1, 0, 0], task), [null, (3 - 5 + 8) % 8, 0, 4]);
  assert.deepEqual(prevMarkedLabels([3, 5, 1], [0, 1, 0], { vocab_size: 8, op: "add" }), [null, 0, 2]);
  assert.throws(() => prevMarkedLabels([1, 2], [1, 1], task), /exactly one/);
  assert.throws(() => prevMarkedLabels([1, 2], [0, 0], task), /exactly one/);
  assert.deepEqual(markedTokens([3, 5, 1], [0, 1, 0]), ["3", "*5", "1"]);
});

test("labels equal mha_lib's PrevMarkedTask (mha_lib)", () => {
  assert.ok(fixture.prev_marked.length >= 20);
  for (const c of fixture.prev_marked) assert.deepEqual(prevMarkedLabels(c.ids, c.types, c.task), c.labels);
});

test("fidelity and paraphrase MRR equal mha_lib.live.paraphrase_scores (mha_lib)", () => {
  for (const c of fixture.scores) {
    const got = paraphraseScores(new Float32Array(c.emb), new Float32Array(c.ref), c.d, c.A);
    assert.ok(Math.abs(got.fidelity - c.fidelity) < 1e-5, `fidelity ${got.fidelity} vs ${c.fidelity}`);
    assert.ok(Math.abs(got.mrr - c.mrr) < 1e-6, `mrr ${got.mrr} vs ${c.mrr}`);
  }
});

test("digit readings equal mha_lib.live.digit_readings: probabilities, [CLS] rows, rollout (mha_lib)", () => {
  assert.ok(fixture.digits.length >= 3);
  const far = (a, b) => Math.max(...a.flat(4).map((x, i) => Math.abs(x - b.flat(4)[i])));
  for (const c of fixture.digits) {
    const got = digitReadings(c.attentions, c.logits, 8);
    assert.equal(got.prediction, c.prediction);
    assert.ok(far(got.probabilities, c.probabilities) < 1e-6, "probabilities");
    assert.ok(far(got.cls, c.cls) < 1e-7 && far(got.cls_self, c.cls_self) < 1e-7, "[CLS] rows");
    assert.ok(far(got.rollout, c.rollout) < 1e-6, `rollout off by ${far(got.rollout, c.rollout)}`);
  }
});

test("rollout: one layer of uniform heads gives (uniform + identity) / 2; rows of R sum to 1", () => {
  const L = 4;
  const uniform = Array.from({ length: L }, () => new Array(L).fill(1 / L));
  const row = clsRollout([[uniform, uniform]]);
  assert.deepEqual(row.map((x) => +x.toFixed(6)), [0.625, 0.125, 0.125, 0.125]);
  const two = clsRollout([[uniform], [uniform]]);
  assert.ok(Math.abs(two.reduce((a, b) => a + b, 0) - 1) < 1e-12);
});

test("digit input: 64 grey levels in [0, 1], as a list or {pixels}; the message names the value", () => {
  assert.deepEqual(checkDigitInput({ pixels: new Array(64).fill(0.5) }, 64), new Array(64).fill(0.5));
  assert.throws(() => checkDigitInput(new Array(63).fill(0), 64), /pixels has 63 grey levels, expected 64/);
  const bad = new Array(64).fill(0);
  bad[12] = 1.5;
  assert.throws(() => checkDigitInput(bad, 64), /pixels\[12\] = 1.5 is outside \[0, 1\]/);
  bad[12] = NaN;
  assert.throws(() => checkDigitInput(bad, 64), /pixels\[12\] = NaN is not a number/);
  bad[12] = "0.5";
  assert.throws(() => checkDigitInput(bad, 64), /pixels\[12\] = "0.5" is not a number/);
  assert.throws(() => checkDigitInput("ink", 64), /pixels must be a list of 64 grey levels, got "ink"/);
  assert.throws(() => checkDigitInput(new Array(64), 64), /sparse array/);
});

test("induction readings equal mha_lib.live.induction_readings: predictions, scores, copyable, accuracy (mha_lib)",
  () => {
    assert.ok(fixture.induction.length >= 4);
    const far = (a, b) => Math.max(0, ...a.flat(4).map((x, i) => Math.abs(x - b.flat(4)[i])));
    for (const c of fixture.induction) {
      const got = inductionReadings(c.attentions, new Float32Array(c.logits), c.ids);
      assert.deepEqual(got.predictions, c.predictions);
      assert.deepEqual(got.copyable, c.copyable);
      assert.ok(far(got.confidence, c.confidence) < 1e-5, "confidence");
      assert.ok(far(got.previous, c.previous) < 1e-6, `previous off by ${far(got.previous, c.previous)}`);
      assert.equal(got.induction === undefined, c.induction === undefined);
      if (c.induction) assert.ok(far(got.induction, c.induction) < 1e-6, "induction");
      assert.equal(got.accuracy, c.accuracy);
    }
  });

test("copyable positions: a token pair seen before; the reader's sequence parsed, naming a bad token", () => {
  assert.deepEqual(copyablePositions([1, 2, 3, 1, 2, 3]), [3, 4]);
  assert.deepEqual(copyablePositions([1, 2, 1, 3]), []); // 1 occurred before, but followed by another token
  assert.deepEqual(copyablePositions([7, 7, 7]), [1]);
  assert.deepEqual(parseSequence(" 3, 5  63\n0", 64, 32), [3, 5, 63, 0]);
  assert.throws(() => parseSequence("3 64", 64, 32), /token 1 is "64", not a number in 0..63/);
  assert.throws(() => parseSequence("3 -1", 64, 32), /token 1 is "-1"/);
  assert.throws(() => parseSequence("3 x", 64, 32), /token 1 is "x"/);
  assert.throws(() => parseSequence("3", 64, 32), /the sequence has 1 tokens; give 2 to 32/);
  assert.throws(() => parseSequence(Array(33).fill(1).join(" "), 64, 32), /33 tokens/);
  let seed = 1;
  const random = () => {
    seed = (seed * 16807) % 2147483647;
    return (seed - 1) / 2147483646;
  };
  for (let k = 0; k < 50; k++) {
    const ids = repeatedSequence(64, 32, random);
    assert.equal(ids.length, 32);
    assert.ok(ids.every((t) => Number.isInteger(t) && t >= 0 && t < 64));
    assert.ok(copyablePositions(ids).length >= 2, ids.join(" ")); // a repeat of 3 or more tokens
  }
});

test("translation readings equal mha_lib.live.translation_readings (mha_lib)", () => {
  assert.ok(fixture.translation.length >= 4);
  const far = (a, b) => Math.max(0, ...a.flat(4).map((x, i) => Math.abs(x - b.flat(4)[i])));
  for (const c of fixture.translation) {
    const got = translationReadings(c.words, c.tokens, new Float32Array(c.logits), c.cross, c.task, c.dictionary);
    assert.deepEqual(got.source_ids, c.source_ids);
    assert.deepEqual(got.expected, c.expected);
    assert.ok(far(got.confidence, c.confidence) < 1e-5, "confidence");
    assert.ok(far(got.aligned, c.aligned) < 1e-6, `aligned off by ${far(got.aligned, c.aligned)}`);
  }
});

test("the toy language's words: s<k> or k, named errors; ids as chapter 6 writes them", () => {
  const task = { num_words: 24, max_words: 12, bos: 1, eos: 2 };
  assert.deepEqual(parseSource("s3 S17, 5", task), [3, 17, 5]);
  assert.throws(() => parseSource("s3 s24", task), /word 1 is "s24", not one of s0 .. s23/);
  assert.throws(() => parseSource("s3 t4", task), /word 1 is "t4"/);
  assert.throws(() => parseSource("  ", task), /the sentence has 0 words; give 1 to 12/);
  assert.throws(() => parseSource(Array(13).fill("s1").join(" "), task), /13 words/);
  assert.deepEqual([1, 2, 0, 3, 26].map((id) => wordName(id, "t", task)), ["<bos>", "<eos>", "<pad>", "t0", "t23"]);
});

test("timing: seeded inputs, medians, a chart whose labels stay text", () => {
  assert.deepEqual(Array.from(seededFloats(4, 7)), Array.from(seededFloats(4, 7)));
  assert.ok(Array.from(seededFloats(1000, 3)).every((x) => x >= -1 && x < 1));
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  const svg = timingSvg([1, 2, 4], [{ label: "<b>x</b> & y", seconds: [1, 2, 4], colour: "#000" },
    { label: "not timed", seconds: null, colour: "#f00" }], "a <title>");
  assert.ok(svg.includes("&lt;b&gt;x&lt;/b&gt; &amp; y") && svg.includes("a &lt;title&gt;") && !svg.includes("<b>"));
  assert.equal((svg.match(/<polyline/g) || []).length, 1); // the series not timed is not drawn
  assert.equal(formatMB(1669), "2 kB");
  assert.equal(formatMB(0), "0.0 MB");
});

test("model ids for people: a model's checkpoints said once", () => {
  const ids = [0, 200, 2000].map((s) => `ch5-induction-l2.step${s}`);
  assert.equal(modelsText(ids), "ch5-induction-l2 at 3 training checkpoints (steps 0 to 2,000)");
  assert.equal(modelsText(["ch1-h1", "ch1-h2"]), "ch1-h1, ch1-h2");
});

test("scores: all heads on gives fidelity 1; bad shapes are refused", () => {
  const ref = new Float32Array([1, 0, 0, 1, 0.6, 0.8, 0.8, 0.6]); // 4 texts, d = 2
  const s = paraphraseScores(ref, ref, 2, 2);
  assert.ok(Math.abs(s.fidelity - 1) < 1e-6);
  assert.throws(() => paraphraseScores(ref, ref, 2, 3), /do not fit/);
  assert.throws(() => paraphraseScores(ref, ref.subarray(2), 2, 1), /do not fit/);
});

test("labels stay text: setText never parses HTML, labels keep the reader's characters", () => {
  const hostile = "<img src=x onerror=alert(1)></script>&amp;";
  const node = {
    set innerHTML(_) {
      throw new Error("innerHTML must not be used");
    },
  };
  setText(node, hostile);
  assert.equal(node.textContent, hostile);
  const line = readoutText("L0.H1", ["[CLS]", hostile], 1, 0, 0.25);
  assert.ok(line.includes(hostile) && line.includes("0.250"));
  assert.equal(shortLabel("abcdefghijklmnop", 12), "abcdefghijk…");
  assert.equal(shortLabel("😀😀😀", 2), "😀…"); // code points, not UTF-16 halves
  assert.equal(formatMB(25028523), "25.0 MB");
});

test("the module never writes HTML: no innerHTML, outerHTML, insertAdjacentHTML or document.write", () => {
  const files = fs.readdirSync(new URL("..", import.meta.url)).filter((f) => f.endsWith(".mjs"));
  assert.ok(files.length > 10, files.join(", "));
  for (const file of files.map((f) => `../${f}`)) {
    const source = fs.readFileSync(new URL(file, import.meta.url), "utf8").replace(/\/\/.*$/gm, "");
    assert.doesNotMatch(source, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/, file);
  }
});

test("configurations are checked against view_contract.json before anything is drawn", () => {
  const map = [[1, 0], [0.5, 0.5]];
  const ok = { tokens: ["a", "b"], attentions: [[map]] };
  assert.equal(checkConfig("sentence", ok), ok);
  assert.equal(checkConfig("sentence", ok, "all-MiniLM-L6-v2"), ok);
  assert.throws(() => checkConfig("sentence", ok, "ch1-h1"), /model must be "all-MiniLM-L6-v2", got "ch1-h1"/);
  assert.throws(() => checkConfig("sentence", { tokens: ["a"], attentions: [[map]] }), /'attentions'\[0\]\[0\] must be a 1 x 1 map/);
  assert.throws(() => checkConfig("sentence", { tokens: [], attentions: [] }), /'tokens' must be a non-empty list/);
  assert.throws(() => checkConfig("sentence", { ...ok, layer: 1 }), /'layer' must be an integer >= 0 and < 1/);
  const prune = { ...ok, text: "a b", texts: ["a", "b"], num_anchors: 1, mask: [[1]], fidelity: 1, mrr: 1, mrr_all: 1 };
  assert.equal(checkConfig("prune", prune), prune);
  assert.throws(() => checkConfig("prune", { ...prune, texts: ["a"] }), /'texts' must be a list of at least 2 items \(2\*num_anchors\)/);
  assert.throws(() => checkConfig("prune", { ...prune, mrr_all: undefined }), /'mrr_all' must be a number, got undefined/);
  assert.throws(() => checkConfig("prune", { ...prune, mask: [[2]] }), /'mask'\[0\]\[0\] must be 0, 1 or a boolean, got 2/);
  const task = { vocab_size: 8, op: "sub" };
  const toy = { models: ["m"], task, ids: [1, 2], types: [0, 1],
    results: { m: { attentions: [[map]], predictions: [0, 1], confidence: [0.5, 0.5] } } };
  assert.equal(checkConfig("toy-compare", toy, "m"), toy);
  assert.throws(() => checkConfig("toy-compare", toy, "n"), /model must be one of 'models' \["m"\], got "n"/);
  assert.throws(() => checkConfig("toy-compare", { ...toy, results: {} }), /'results'\['m'\] must be an object/);
  assert.throws(() => checkConfig("toy-compare", { ...toy, task: undefined }), /'task' must be an object/);
  assert.throws(() => checkConfig("toy-compare", { ...toy, task: { ...task, op: "mul" } }), /'task'\['op'\] must be one of "sub", "add"/);
  assert.throws(() => checkConfig("other", ok), /unknown view/);
  assert.throws(() => checkConfig("sentence", null), /JSON object/);
});

test("toy input: copies of a valid {ids, types}; a bad one is refused, naming the offending value", () => {
  const ids = [3, 5, 1, 7];
  const types = [0, 1, 0, 0];
  const got = checkToyInput({ ids, types }, 4, 8);
  assert.deepEqual(got, { ids, types });
  assert.ok(got.ids !== ids && got.types !== types); // the caller may change its arrays afterwards
  const bad = (input, pattern) => assert.throws(() => checkToyInput(input, 4, 8), pattern);
  bad({ ids: [3, 9, 1, 7], types }, /ids\[1\] = 9 is out of 0\.\.7/);
  bad({ ids: [3, -1, 1, 7], types }, /ids\[1\] = -1 is out of 0\.\.7/);
  bad({ ids: [1.5, 5, 1, 7], types }, /ids\[0\] = 1\.5 is not an integer/);
  bad({ ids: ["1", 5, 1, 7], types }, /ids\[0\] = "1" is not an integer/);
  bad({ ids: [NaN, 5, 1, 7], types }, /ids\[0\] = NaN/);
  bad({ ids, types: [0, 1, 0, 1] }, /2 marked positions \(1, 3\)/);
  bad({ ids, types: [0, 0, 0, 0] }, /no marked position/);
  bad({ ids, types: [0, 2, 0, 0] }, /types\[1\] = 2 is not 0 or 1/);
  bad({ ids, types: [0, true, 0, 0] }, /types\[1\] = true is not 0 or 1/);
  bad({ ids: [3, 5, 1], types: [0, 1, 0] }, /ids has 3 tokens, expected 4/);
  bad({ ids, types: [0, 1, 0] }, /types has 3 0\/1 values, expected 4/);
  bad({ ids }, /types must be a list of 4/);
  bad(null, /got null/);
  bad("1 2 3", /got "1 2 3"/);
  bad([1, 2], /got an array of 2/);
});

test("head mask: 0/1 numbers or booleans of the right shape; anything else is refused by name", () => {
  assert.deepEqual(checkHeadMask([[1, 0, true], [false, 1, 1]], 2, 3), [[1, 0, 1], [0, 1, 1]]);
  const bad = (mask, pattern) => assert.throws(() => checkHeadMask(mask, 2, 3), pattern);
  bad([["0", 1, 1], [1, 1, 1]], /mask\[0\]\[0\] = "0" is not 0\/1/);
  bad([[1, 1, 1], [1, NaN, 1]], /mask\[1\]\[1\] = NaN is not 0\/1/);
  bad([[1, 1, 2], [1, 1, 1]], /mask\[0\]\[2\] = 2/);
  bad([[1, 1, 1], [1, 1, -1]], /mask\[1\]\[2\] = -1/);
  bad([[1, 0.5, 1], [1, 1, 1]], /mask\[0\]\[1\] = 0\.5/);
  bad([[1, null, 1], [1, 1, 1]], /mask\[0\]\[1\] = null/);
  bad([[1, 1, 1]], /1 rows, expected 2/);
  bad([[1, 1, 1], [1, 1]], /mask\[1\] has 2 values, expected 3/);
  bad([[1, 1, 1], 7], /mask\[1\] must be a list of 3 values, got 7/);
  bad(null, /got null/);
  bad(42, /got 42/);
  assert.equal(describeValue("x".repeat(50)), JSON.stringify(`${"x".repeat(40)}…`));
  assert.equal(describeValue({}), "an object");
});

test("licence line: one link per licence file of the manifest, the runtime's always", () => {
  const manifest = { models: {
    big: { license: "big.LICENSE.txt", license_name: "Apache-2.0" },
    "all-MiniLM-L6-v2": { license: "all-MiniLM-L6-v2.LICENSE.txt" },
    t1: { license: "mha_lib.LICENSE.txt" }, t2: { license: "mha_lib.LICENSE.txt" },
  } };
  const one = licenceParts(["all-MiniLM-L6-v2"], manifest);
  assert.equal(one.length, 2);
  assert.equal(one[0].label, "Model: all-MiniLM-L6-v2");
  assert.match(one[0].detail, /Apache-2\.0, converted to ONNX, float16 weights/);
  assert.equal(one[0].href, new URL("all-MiniLM-L6-v2.LICENSE.txt", URLS.models).href);
  assert.equal(one[1].href, new URL("LICENSE", URLS.ortDir).href);
  assert.match(one[1].label + one[1].detail, /onnxruntime-web.*MIT/);
  const toys = licenceParts(["t1", "t2"], manifest);
  assert.equal(toys[0].label, "Models: t1, t2");
  assert.ok(toys[0].href.endsWith("/models/mha_lib.LICENSE.txt"));
  assert.equal(licenceParts(["big"], manifest)[0].detail, "Apache-2.0"); // the manifest's own wording first
  const none = licenceParts(["all-MiniLM-L6-v2"], null); // manifest unreadable: no model link, the runtime's stays
  assert.equal(none[0].href, null);
  assert.ok(none[1].href);
});

test("a manifest that failed to load is asked for again, not cached", async () => {
  const real = globalThis.fetch;
  const calls = [];
  let status = 503;
  globalThis.fetch = async (url) => {
    calls.push(String(url));
    return { ok: status === 200, status, json: async () => ({ models: { m: { bytes: 1 } } }) };
  };
  try {
    await assert.rejects(getManifest(), /HTTP 503 for .*manifest\.json/);
    await new Promise((r) => setTimeout(r, 0)); // the rejection handler forgets the promise
    status = 200;
    const m = await getManifest();
    assert.equal(m.models.m.bytes, 1);
    assert.equal(await getManifest(), m); // a success is kept: no third request
    assert.equal(calls.length, 2);
  } finally {
    globalThis.fetch = real;
  }
});

test("download notice: one model or several, the runtime left out once loaded, nothing left", () => {
  assert.equal(downloadText(1, 22.4e6, 14.2e6), "the model (22.4 MB) and the runtime (14.2 MB)");
  assert.equal(downloadText(4, 0.9e6, 14.2e6), "the four models (0.9 MB) and the runtime (14.2 MB)");
  assert.equal(downloadText(4, 0.9e6, 0), "the four models (0.9 MB)");
  assert.equal(downloadText(12, 1e6, null), "the 12 models (1.0 MB)");
  assert.equal(downloadText(0, 0, 14.2e6), "the runtime (14.2 MB)");
  assert.equal(downloadText(0, 0, 0), "");
});

test("rowEnd: the enlarged map opens under the clicked map's row", () => {
  assert.equal(rowEnd(0, 4, 12), 3);
  assert.equal(rowEnd(5, 4, 12), 7);
  assert.equal(rowEnd(11, 4, 12), 11);
  assert.equal(rowEnd(9, 4, 10), 9); // a short last row
  assert.equal(rowEnd(2, 1, 3), 2);
  assert.throws(() => rowEnd(12, 4, 12), /item 12 of 12/);
  assert.throws(() => rowEnd(0, 0, 12), /0 columns/);
});

/** A stand-in for anywidget's model: send() is answered by `answer(content)` -> [reply, buffers], later. */
function fakeWidget(answer) {
  const listeners = new Set();
  const sent = [];
  return {
    sent,
    listeners,
    on(name, cb) { if (name === "msg:custom") listeners.add(cb); },
    off(_name, cb) { listeners.delete(cb); },
    send(content) {
      sent.push(structuredClone(content)); // what the comm carries: JSON-able
      const [reply, buffers] = answer(content);
      setTimeout(() => {
        for (const cb of listeners) cb({ ...reply, request: content.request }, buffers);
        for (const cb of listeners) cb({ op: "result", request: "someone-else", outputs: {} }, []); // another view's
      }, 0);
    },
  };
}

test("kernel backend: loads from the kernel, sends plain feeds, reads float32 buffers, rejects errors", async () => {
  const info = { kind: "token-classifier", num_layers: 1, num_heads: 2, max_length: 16,
    inputs: ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"], outputs: ["logits", "attentions"] };
  const logits = new Float32Array([0.5, -1, 2, 3]);
  const widget = fakeWidget((c) => {
    if (c.op === "load") return [{ op: "loaded", info, vocab: null }, []];
    if (c.feeds.input_ids.data[0] === 99) return [{ op: "error", message: "feeds['input_ids'][0][0] = 99 is not a token id" }, []];
    return [{ op: "result", outputs: { logits: { dims: [1, 2, 2], buffer: 0 } } }, [new DataView(logits.buffer)]];
  });
  const backend = kernelBackend(widget);
  assert.equal(backend.kind, "kernel");
  const model = await backend.loadModel("ch1-h2");
  assert.equal(await backend.loadModel("ch1-h2"), model); // loaded once
  assert.deepEqual(model.session.inputNames, info.inputs);
  assert.equal(model.tokenizer, null);
  const feeds = {
    input_ids: new model.ort.Tensor("int64", new BigInt64Array([3n, 4n]), [1, 2]),
    key_padding_mask: new KernelTensor("bool", new Uint8Array([0, 1]), [1, 2]),
  };
  const out = await model.session.run(feeds);
  assert.ok(out.logits.data instanceof Float32Array);
  assert.deepEqual(Array.from(out.logits.data), Array.from(logits));
  assert.deepEqual(out.logits.dims, [1, 2, 2]);
  const run = widget.sent.find((c) => c.op === "run");
  assert.deepEqual(run.feeds.input_ids, { type: "int64", dims: [1, 2], data: [3, 4] }); // BigInt -> number
  assert.deepEqual(run.feeds.key_padding_mask.data, [0, 1]);
  assert.equal(run.model, "ch1-h2");
  feeds.input_ids.data[0] = 99n;
  await assert.rejects(model.session.run(feeds), /= 99 is not a token id/);
  backend.close();
  assert.equal(widget.listeners.size, 0);
});

test("token rows of a split model: fetched once per file, each position gets its row, a short file is refused", async () => {
  const spec = { dir: "m.rows/", rows: 10, dim: 2, rows_per_file: 4, file_bytes: 16 };
  const table = Array.from({ length: 10 }, (_, id) => [id * 2, id * 2 + 1]); // row id holds id*2, id*2+1
  const asked = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (url) => {
    asked.push(String(url).split("/").pop());
    const k = Number(String(url).match(/(\d{4})\.bin$/)[1]);
    const rows = table.slice(k * 4, k * 4 + 4).flat();
    const bytes = k === 2 && url.includes("short") ? new Uint16Array(1) : Uint16Array.from(rows);
    return new Response(bytes.buffer, { status: 200 });
  };
  try {
    const digests = Array.from({ length: 3 }, (_, k) => sha(new Uint8Array(Uint16Array.from(table.slice(k * 4, k * 4 + 4).flat()).buffer)));
    spec.file_sha256 = digests;
    const model = { info: { token_rows: spec } };
    await fetchTokenRows(model, [[9, 1, 5], [5]]);
    assert.deepEqual(asked.sort(), ["0000.bin", "0001.bin", "0002.bin"]); // row 0 (padding) always
    await fetchTokenRows(model, [[1, 2]]);
    assert.equal(asked.length, 3); // nothing new to fetch
    const ids = BigInt64Array.from([9n, 1n, 5n, 5n, 0n, 0n]); // (2, 3): row 1 is [5] then padding
    const feeds = tokenRowFeeds(spec, model.rowFiles, ids, 2, 3, KernelTensor);
    assert.deepEqual(feeds.token_rows.dims, [4, 2]);
    assert.deepEqual(feeds.token_index.dims, [2, 3]);
    const index = Array.from(feeds.token_index.data, Number);
    index.forEach((u, i) => {
      const id = Number(ids[i]);
      assert.deepEqual(Array.from(feeds.token_rows.data.slice(u * 2, u * 2 + 2)), table[id]);
    });
    assert.throws(() => tokenRowFeeds(spec, new Map(), ids, 2, 3, KernelTensor), /token id 9 were not fetched/);
    const short = { info: { token_rows: { ...spec, dir: "short.rows/" } } };
    await assert.rejects(fetchTokenRows(short, [[9]]), /0002\.bin holds 2 bytes, not 8/);
  } finally {
    globalThis.fetch = realFetch;
  }
});

test("lists: holes, extra properties and non-arrays are refused by one check, naming the value", () => {
  const holes = new Array(6);
  // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
  const gap = [1, , 2];
  const extra = [1, 1, 1];
  extra.foo = 1;
  // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
  const both = [1, , 1];
  both.bar = 1; // as many keys as indices: still refused
  assert.equal(arrayFlaw([1, 2, 3]), null);
  assert.equal(arrayFlaw([]), null);
  assert.match(arrayFlaw(holes), /holes at 0, 1, 2, …/);
  assert.match(arrayFlaw(gap), /a hole at 1/);
  assert.match(arrayFlaw(extra), /the extra property "foo"/);
  assert.match(arrayFlaw(both), /a hole at 1/);
  assert.match(describeValue(holes), /^a sparse array of 6 \(holes at 0, 1, 2, …\)$/);
  assert.match(describeValue(extra), /^an array of 3 \(the extra property "foo"\)$/);
  assert.deepEqual(checkArray([1, 2], { name: "x", length: 2 }), [1, 2]);
  for (const v of [holes, gap, extra, both, null, "abc", { length: 3 }, new Float32Array(3)]) {
    assert.throws(() => checkArray(v, { name: "x", length: v?.length }), /x must be a list of/);
  }
  assert.throws(() => checkArray([1, 2], { name: "x", length: 3, what: "tokens" }), /x has 2 tokens, expected 3/);
  // the toy input and the head mask use it: every list, at every depth
  const ids = [3, 5, 1, 7];
  const types = [0, 1, 0, 0];
  // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
  const sparseIds = [3, , 1, 7];
  assert.throws(() => checkToyInput({ ids: sparseIds, types }, 4, 8), /ids must be a list of 4 tokens, got a sparse array of 4 \(a hole at 1\)/);
  assert.throws(() => checkToyInput({ ids, types: new Array(4) }, 4, 8), /types must be a list of 4 0\/1 values, got a sparse array/);
  const extraIds = ids.slice();
  extraIds.foo = 1;
  assert.throws(() => checkToyInput({ ids: extraIds, types }, 4, 8), /extra property "foo"/);
  assert.throws(() => checkHeadMask(new Array(2), 2, 3), /mask must be a list of 2 rows, got a sparse array of 2/);
  assert.throws(() => checkHeadMask([[1, 1, 1], new Array(3)], 2, 3), /mask\[1\] must be a list of 3 values, got a sparse array/);
  // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
  assert.throws(() => checkHeadMask([[1, , 1], [1, 1, 1]], 2, 3), /mask\[0\] .*a hole at 1/);
  const row = [1, 1, 1];
  row.x = 0;
  assert.throws(() => checkHeadMask([[1, 1, 1], row], 2, 3), /mask\[1\] .*extra property "x"/);
  const map = [[1, 0], [0.5, 0.5]];
  assert.throws(() => checkConfig("sentence", { tokens: ["a", "b"], attentions: [new Array(1)] }),
    /'attentions'\[0\] must be a non-empty list of heads, got a sparse array/);
  assert.throws(() => checkConfig("prune", { text: "a", tokens: ["a", "b"], attentions: [[map]], texts: ["a", "b"], num_anchors: 1,
    mask: [new Array(1)], fidelity: 1, mrr: 1, mrr_all: 1 }), /'mask'\[0\] must be a list of 1 values.*, got a sparse array/);
});

test("backend results: NaN and ±Infinity are refused before drawing, naming the model and the output", () => {
  const ok = { attentions: { data: new Float32Array([0.5, 0.5]), dims: [2] }, ids: { data: BigInt64Array.from([1n]) } };
  assert.equal(checkFinite("m", ok), ok);
  const nan = { logits: { data: new Float32Array([1, NaN, 2, NaN]), dims: [4] } };
  assert.throws(() => checkFinite("ch1-h2", nan), /the model ch1-h2 computed non-finite logits: 2 of 4 values \(2 NaN\), the first at index 1/);
  const inf = { sentence_embedding: { data: new Float32Array([Infinity, 0, -Infinity]), dims: [3] } };
  assert.throws(() => checkFinite("all-MiniLM-L6-v2", inf), /non-finite sentence_embedding: 2 of 3 values \(2 ±Infinity\)/);
});

test("SHA-256: the plain-JavaScript one and crypto.subtle equal node's, at every padding length", async () => {
  const lengths = [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 24576, 100003];
  for (const n of lengths) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 2654435761) >>> 24);
    assert.equal(sha256Hex(bytes), sha(bytes), `length ${n}`);
    assert.equal(await sha256Of(bytes, null), sha(bytes), `no crypto.subtle, length ${n}`);
    assert.equal(await sha256Of(bytes), sha(bytes), `crypto.subtle, length ${n}`);
  }
  assert.equal(sha256Hex(new TextEncoder().encode("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const bytes = new TextEncoder().encode("[PAD]\n[unused0]\n");
  await checkDigest("v.txt", bytes, sha(bytes));
  await assert.rejects(checkDigest("v.txt", bytes, sha(bytes.subarray(1))), /v\.txt is not the file the book was built with/);
  await assert.rejects(checkDigest("v.txt", bytes, undefined), /gives no SHA-256 for v\.txt \(got undefined\)/);
});

test("token rows: a same-size wrong row file, or one without a digest, is refused by name", async () => {
  const spec = { dir: "m.rows/", rows: 8, dim: 2, rows_per_file: 4, file_bytes: 16 };
  const file = (k) => new Uint8Array(Uint16Array.from({ length: 8 }, (_, i) => k * 8 + i).buffer);
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (url) => new Response(file(Number(String(url).match(/(\d{4})\.bin$/)[1])), { status: 200 });
  try {
    const swapped = { info: { token_rows: { ...spec, file_sha256: [sha(file(0)), sha(file(0))] } } };
    await assert.rejects(fetchTokenRows(swapped, [[5]]), /m\.rows\/0001\.bin is not the file the book was built with/);
    assert.ok(!swapped.rowFiles.has(1)); // never used
    const none = { info: { token_rows: spec } };
    await assert.rejects(fetchTokenRows(none, [[1]]), /gives no SHA-256 for m\.rows\/0000\.bin/);
    const good = { info: { token_rows: { ...spec, file_sha256: [sha(file(0)), sha(file(1))] } } };
    await fetchTokenRows(good, [[5]]);
    assert.deepEqual([...good.rowFiles.keys()].sort(), [0, 1]);
  } finally {
    globalThis.fetch = realFetch;
  }
});

test("a text past the limit: the status gives its real length, and that the maps are of the first tokens", () => {
  const t = truncationText("x".repeat(10000), 10002, 256);
  assert.match(t, /10,000 characters/);
  assert.match(t, /10,002 tokens/);
  assert.match(t, /first 256 tokens/);
  assert.match(t, /keeps your whole text/);
});

test("what the model cannot read: [UNK] pieces counted and said, nothing said without them", () => {
  assert.equal(unknownText(["[CLS]", "the", "cat", "[SEP]"]), "");
  const said = unknownText(["[CLS]", "[UNK]", "[UNK]", "把", "[SEP]"]);
  assert.match(said, /^ 2 of its 3 word pieces are \[UNK\]: the model's vocabulary is English/);
  assert.match(unknownText(["[CLS]", "[UNK]", "[SEP]"]), / 1 of its 1 word pieces is \[UNK\]/);
});

test("export: XML escaping, CSV fields (quotes, line breaks, spreadsheet formulas), file names", () => {
  assert.equal(escapeXml(`<img src=x onerror="a('1')"> & </svg>`),
    "&lt;img src=x onerror=&quot;a(&#39;1&#39;)&quot;&gt; &amp; &lt;/svg&gt;");
  assert.equal(escapeXml("form\ffeed\u000bvt\u0000nul\ttab\nline"), "formfeedvtnul\ttab\nline"); // XML 1.0's forbidden
  assert.equal(csvField("the"), "the");
  assert.equal(csvField('say "hi", then'), '"say ""hi"", then"');
  assert.equal(csvField("two\nlines"), '"two\nlines"');
  assert.equal(csvField("=1+1"), "'=1+1"); // shown by a spreadsheet, never computed
  assert.equal(csvField("@SUM(A1)"), "'@SUM(A1)");
  assert.equal(csvField(-0.5), "-0.5"); // numbers stay numbers
  assert.equal(fileName(["all-MiniLM-L6-v2", "L3", "<b>/..\\"], "png"), "all-MiniLM-L6-v2_L3_b-...png");
  assert.equal(fileName(["", "//"], "csv"), "maps.csv");
});

/** Two heads of a 3-token map and one of 70 tokens (drawn as an image in the SVG). */
function figureOf(n = 3) {
  const map = Array.from({ length: n }, (_, q) => Array.from({ length: n }, (_, k) => (q === k ? 1 : 0)));
  const tokens = Array.from({ length: n }, (_, i) => (i === 1 ? '"x", <y>' : `t${i}`));
  return { title: ["model: layer 0", "Input: “<script>alert(1)</script>”"], vmax: 1,
    heads: [{ label: "L0.H0", tokens, map, off: false }, { label: "L0.H1", tokens, map, off: true }] };
}

test("export: the CSV has one row per cell of every head shown, weights and tokens as in the maps", () => {
  const csv = figureCsv(figureOf());
  assert.ok(csv.startsWith("\uFEFFhead,"));
  const lines = csv.slice(1).trimEnd().split("\n");
  assert.equal(lines[0], "head,off,query,key,query_token,key_token,weight");
  assert.equal(lines.length, 1 + 2 * 9);
  assert.equal(lines[1], "L0.H0,0,0,0,t0,t0,1.000000");
  assert.equal(lines[2], "L0.H0,0,0,1,t0,\"\"\"x\"\", <y>\",0.000000");
  assert.equal(lines[10].split(",")[1], "1"); // the head turned off
});

test("export: the SVG holds every cell as a rectangle (an image past the limit), the reader's text escaped", () => {
  const svg = figureSvg(figureOf(), () => assert.fail("no image below the limit"));
  assert.equal((svg.match(/<rect /g) || []).length, 1 + 2 * 9); // the background, then the cells
  assert.ok(!svg.includes("<script>") && svg.includes("&lt;script&gt;alert(1)&lt;/script&gt;"));
  assert.ok(svg.includes(">L0.H1 (off)</text>"));
  const f = figureLayout(2, 3, 2);
  assert.ok(svg.startsWith(`<svg xmlns="http://www.w3.org/2000/svg" width="${f.width}" height="${f.height}"`));
  const n = Math.ceil(Math.sqrt(SVG_RECT_CELLS / 2)) + 1; // two heads of n x n: past the limit
  let asked = 0;
  const long = figureSvg(figureOf(n), () => { asked += 1; return "data:image/png;base64,AAAA"; });
  assert.equal(asked, 2);
  assert.equal((long.match(/<rect /g) || []).length, 1);
  assert.equal((long.match(/<image /g) || []).length, 2);
});

test("export: figure layout, maps in rows under the title, none overlapping", () => {
  const f = figureLayout(72, 14, 3);
  assert.equal(f.columns, 6);
  const boxes = Array.from({ length: 72 }, (_, i) => f.at(i));
  for (let i = 1; i < 72; i++) {
    const [a, b] = [boxes[i - 1], boxes[i]];
    assert.ok(b.x >= a.x + f.side + f.gap || b.y >= a.y + f.side + f.labelHeight + f.gap);
  }
  const last = boxes[71];
  assert.ok(last.x + f.side <= f.width - f.pad && last.y + f.side + f.labelHeight <= f.height - f.pad);
  assert.throws(() => figureLayout(0, 3, 1), /needs maps and tokens/);
});

test("onnxMetadata reads the metadata_props that the onnx package wrote (mha_lib)", () => {
  assert.ok(fixture.onnx.length >= 3);
  for (const { base64, metadata } of fixture.onnx) {
    const bytes = new Uint8Array(Buffer.from(base64, "base64"));
    assert.deepEqual({ ...onnxMetadata(bytes) }, metadata);
    // a file cut short is refused, never read as other metadata
    assert.throws(() => onnxMetadata(bytes.subarray(0, bytes.length - 3)), /not an ONNX file/);
  }
});

test("onnxMetadata refuses bytes that are not a protobuf message", () => {
  assert.throws(() => onnxMetadata(new TextEncoder().encode("<script>x</script>")), /not an ONNX file/);
  assert.throws(() => onnxMetadata(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])),
    /not an ONNX file/);
  assert.deepEqual({ ...onnxMetadata(new Uint8Array([])) }, {});
  // field 14 twice with the key "a": refused, not "last one wins"
  const entry = [0x72, 6, 0x0a, 1, 0x61, 0x12, 1, 0x62];
  assert.throws(() => onnxMetadata(new Uint8Array([...entry, ...entry])), /gives “a” twice/);
  // a key "__proto__" is kept as a key
  const proto = new TextEncoder().encode("__proto__");
  const m = onnxMetadata(new Uint8Array([0x72, proto.length + 5, 0x0a, proto.length, ...proto, 0x12, 1, 0x78]));
  assert.equal(Object.getOwnPropertyDescriptor(m, "__proto__")?.value, "x"); // an own key, not the prototype
});

test("head roles: the book's measured roles follow a head's label, only where given", () => {
  const map = [[1]];
  const attentions = [[map, map], [map, map]];
  const roles = rolesOf([{ layer: 1, head: 0, role: "det" }]);
  assert.deepEqual(headsOf(attentions, 1, null, roles).flat().map((h) => h.label), ["L1.H0 · det", "L1.H1"]);
  assert.deepEqual(headsOf(attentions, "all", null, null).flat().map((h) => h.label), ["L0.H0", "L0.H1", "L1.H0", "L1.H1"]);
  assert.equal(rolesOf([]), null);
  assert.equal(rolesOf(undefined), null);
});

test("timing: a curve that falls where it cannot (a later H faster in every round, past 10%) is called busy", () => {
  const heads = [1, 2, 4, 16];
  const steady = [[1.0, 1.1, 1.05], [1.0, 1.2, 1.1], [1.3, 1.4, 1.35], [2.0, 2.2, 2.1]];
  assert.deepEqual(timingVerdict(heads, steady), { busy: false });
  const dip = [[1.0, 1.1], [0.97, 1.05], [1.3, 1.4], [2.0, 2.2]]; // 2 heads a little faster: within the spread
  assert.equal(timingVerdict(heads, dip).busy, false);
  const tiny = [[1.0, 1.02], [0.95, 0.97], [1.3, 1.4], [2.0, 2.2]]; // apart, but by less than 10%: not called busy
  assert.equal(timingVerdict(heads, tiny).busy, false);
  const busy = [[2.0, 2.1, 1.9], [1.0, 1.1, 1.05], [1.3, 1.4, 1.35], [1.2, 1.25, 1.1]]; // the 0.59x
  assert.deepEqual(timingVerdict(heads, busy), { busy: true, earlier: 1, later: 2 });
  const svg = timingSvg(heads, [{ label: "d", seconds: [1, 1, 1.3, 2], colour: "#000", spread: [[0.9, 1.1], [0.9, 1.1],
    [1.2, 1.4], [1.9, 2.3]], busy: true }], "t");
  assert.match(svg, /stroke-dasharray/);
  assert.equal((svg.match(/<line x1="[\d.]+" x2="[\d.]+" y1/g) || []).length >= 4, true); // a bar per head count
});

test("clock: an update's parts add up with the rest, and every session.run is listed with its file and shapes", async () => {
  const clock = new Clock();
  clock.time("feeds", () => { for (let i = 0; i < 1e5; i++); });
  const session = { file: "m.layer0.onnx", run: async () => ({ out: 1 }) };
  const feeds = { hidden: { dims: [1, 4, 8] }, head_mask: { dims: [12] } };
  assert.deepEqual(await clock.run(session, feeds), { out: 1 });
  clock.add("draw", 2);
  const parts = clock.done();
  assert.equal(parts.calls.length, 1);
  assert.deepEqual(parts.calls[0].dims, { hidden: [1, 4, 8], head_mask: [12] });
  assert.equal(parts.calls[0].file, "m.layer0.onnx");
  assert.equal(parts.runs.length, 1);
  const sum = parts.feeds_ms + parts.load_ms + parts.run_ms + parts.read_ms + parts.draw_ms + parts.other_ms;
  assert.ok(Math.abs(sum - parts.total_ms) < 1e-6 || parts.other_ms === 0);
});

test("speed inputs: each view's next input is valid for it and differs from the last", () => {
  const mask = [[1, 1, 1], [1, 1, 1]];
  assert.notEqual(speedInput("sentence", 0, {}), speedInput("sentence", 1, {}));
  assert.equal(speedInput("sentence", 12, {}), `${speedInput("sentence", 0, {})} `); // a new text after the list
  const toggled = speedInput("prune", 1, { mask }).mask;
  assert.equal(toggled.flat().filter((x) => x === 0).length, 1);
  const toy = speedInput("toy-compare", 0, { ids: [1, 2, 3], types: [0, 1, 0] });
  assert.deepEqual(toy, { ids: [2, 3, 1], types: [1, 0, 0] });
  assert.deepEqual(speedInput("induction", 13, { mask, steps: 12 }).checkpoint, 1);
  assert.equal(speedInput("digit", 0, { pixels: new Array(64).fill(0) }).length, 64);
  assert.equal(speedInput("timing", 0, {}), null);
});

// ---------------------------------------------------------------------------------------- hostile models (issue 47)

test("backend results: NaN and ±Infinity are refused in every float type, 16-bit ones decoded to numbers", () => {
  // float16 as onnxruntime-web gives it where the browser has no Float16Array: the raw bits in a Uint16Array
  const half = { logits: { type: "float16", dims: [4], data: Uint16Array.from([0x3c00, 0x7e00, 0xc000, 0x7c00]) } };
  assert.throws(() => checkFinite("mine.onnx", half),
    /the model mine\.onnx computed non-finite logits: 2 of 4 values \(1 NaN, 1 ±Infinity\), the first at index 1/);
  const bf16 = { attentions: { type: "bfloat16", dims: [2], data: Uint16Array.from([0x3f80, 0xffc0]) } };
  assert.throws(() => checkFinite("m", bf16), /non-finite attentions: 1 of 2 values \(1 NaN\), the first at index 1/);
  const plain = { logits: { type: "float32", dims: [2], data: [0.5, NaN] } }; // a float type whatever holds it
  assert.throws(() => checkFinite("m", plain), /non-finite logits: 1 of 2/);
  const ok = checkFinite("m", { logits: { type: "float16", dims: [3], data: Uint16Array.from([0x3c00, 0xc000, 0x0001]) },
    ids: { type: "int64", dims: [1], data: BigInt64Array.from([7n]) } });
  assert.ok(ok.logits.data instanceof Float32Array);
  assert.deepEqual(Array.from(ok.logits.data), [1, -2, 2 ** -24]); // read as numbers, not as bit patterns
  assert.equal(ok.logits.type, "float32");
  assert.equal(ok.ids.data[0], 7n);
  if (typeof globalThis.Float16Array === "function") { // onnxruntime-web's float16 where the browser has one
    const f16 = { logits: { type: "float16", dims: [2], data: new globalThis.Float16Array([1, NaN]) } };
    assert.throws(() => checkFinite("m", f16), /non-finite logits: 1 of 2/);
  }
});

/** A model as a backend's load() gives it, its session answering `answer(feeds)`; `calls` counts the runs. */
function fakeModel({ layers, heads, answer }) {
  class Tensor {
    constructor(type, data, dims) {
      Object.assign(this, { type, data, dims });
    }
  }
  const model = { id: "mine.onnx", info: { num_layers: layers, num_heads: heads, own: true }, ort: { Tensor },
    queue: Promise.resolve(), prepare: async () => {}, calls: 0,
    session: { inputNames: ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"],
      run: async (feeds) => { model.calls += 1; return answer(feeds); } } };
  return model;
}

/** What a toy model returns on (1, L) ids: logits (1, L, C), attentions (NL, 1, H, L, L) of uniform causal rows. */
function toyOutputs(NL, H, L, C = 5) {
  const att = new Float32Array(NL * H * L * L);
  for (let m = 0; m < NL * H; m++) for (let q = 0; q < L; q++) for (let k = 0; k <= q; k++) att[(m * L + q) * L + k] = 1 / (q + 1);
  return { logits: { type: "float32", dims: [1, L, C], data: new Float32Array(L * C) },
    attentions: { type: "float32", dims: [NL, 1, H, L, L], data: att } };
}

test("a model's attentions are read only when their layers and heads are the ones it declares", async () => {
  // issue 47: a file declaring 2 heads (its head_mask) but returning 64 drew 64 maps
  const liar = fakeModel({ layers: 1, heads: 2, answer: (f) => toyOutputs(1, 64, Number(f.input_ids.dims[1])) });
  await assert.rejects(compute.runToy(liar, [1, 2, 3], [1, 0, 0]),
    /the model mine\.onnx returned attentions of dims \[1,1,64,3,3\]; it declares 1 layer of 2 heads/);
  const honest = fakeModel({ layers: 2, heads: 2, answer: (f) => toyOutputs(2, 2, Number(f.input_ids.dims[1])) });
  const r = await compute.runToy(honest, [1, 2, 3], [1, 0, 0]);
  assert.equal(r.attentions.length, 2);
  assert.equal(r.attentions[0].length, 2);
});

test("a reader's own model: its size is refused past OWN_MODEL_LIMITS before it runs, its outputs checked after", async () => {
  const { OWN_MODEL_LIMITS, checkOwnModel } = compute;
  assert.deepEqual({ ...OWN_MODEL_LIMITS }, { layers: 48, heads: 64, maps: 1024 });
  // a (4096, 4096) head_mask: refused before any run (a run would first allocate its 16.8 M gates)
  const huge = fakeModel({ layers: 4096, heads: 4096, answer: () => assert.fail("ran") });
  await assert.rejects(checkOwnModel(huge, [0, 0, 0], [1, 0, 0]),
    /“mine\.onnx” declares 4096 layers of 4096 heads; the page draws at most 48 layers, 64 heads a layer and 1024 maps/);
  const wide = fakeModel({ layers: 1, heads: 3000, answer: () => assert.fail("ran") });
  await assert.rejects(checkOwnModel(wide, [0, 0, 0], [1, 0, 0]), /declares 1 layer of 3000 heads/);
  const many = fakeModel({ layers: 40, heads: 40, answer: () => assert.fail("ran") }); // 1600 maps
  await assert.rejects(checkOwnModel(many, [0, 0, 0], [1, 0, 0]), /declares 40 layers of 40 heads/);
  assert.equal(huge.calls + wide.calls + many.calls, 0);
  // declared 2 heads, returns 64: refused on the trial run, before any view draws
  const liar = fakeModel({ layers: 1, heads: 2, answer: (f) => toyOutputs(1, 64, Number(f.input_ids.dims[1])) });
  await assert.rejects(checkOwnModel(liar, [0, 0, 0], [1, 0, 0]), /returned attentions of dims \[1,1,64,3,3\]; it declares 1 layer of 2 heads/);
  // attentions of another length, integer logits, a NaN: refused naming them
  const short = fakeModel({ layers: 1, heads: 2, answer: () => toyOutputs(1, 2, 2) });
  await assert.rejects(checkOwnModel(short, [0, 0, 0], [1, 0, 0]), /attentions of dims \[1,1,2,2,2\]; .*3 tokens/);
  const ints = fakeModel({ layers: 1, heads: 2, answer: () => ({ ...toyOutputs(1, 2, 3),
    logits: { type: "int64", dims: [1, 3, 5], data: new BigInt64Array(15) } }) });
  await assert.rejects(checkOwnModel(ints, [0, 0, 0], [1, 0, 0]), /returned its logits as int64, not as float numbers/);
  const nan = fakeModel({ layers: 1, heads: 2, answer: () => {
    const out = toyOutputs(1, 2, 3);
    out.logits = { type: "float16", dims: [1, 3, 5], data: new Uint16Array(15).fill(0x7e00) };
    return out;
  } });
  await assert.rejects(checkOwnModel(nan, [0, 0, 0], [1, 0, 0]), /computed non-finite logits: 15 of 15 values \(15 NaN\)/);
  const fine = fakeModel({ layers: 2, heads: 4, answer: (f) => toyOutputs(2, 4, Number(f.input_ids.dims[1])) });
  const out = await checkOwnModel(fine, [0, 0, 0], [1, 0, 0]);
  assert.deepEqual(out.attentions.dims, [2, 1, 4, 3, 3]);
});

test("a toy model's logits are read only when they are (1, L, classes) of the sequence run", async () => {
  // an own model whose logits hold one position: the other positions' predictions were read past its end
  const short = fakeModel({ layers: 1, heads: 2, answer: (f) => ({ ...toyOutputs(1, 2, Number(f.input_ids.dims[1])),
    logits: { type: "float32", dims: [1, 1, 5], data: new Float32Array(5) } }) });
  await assert.rejects(compute.runToy(short, [1, 2, 3], [1, 0, 0]),
    /the model mine\.onnx returned logits of dims \[1,1,5\]; the page ran 1 × 3 tokens/);
  await assert.rejects(compute.checkOwnModel(short, [1, 2, 3], [1, 0, 0]), /returned logits of dims \[1,1,5\]/);
  const none = fakeModel({ layers: 1, heads: 2, answer: (f) => ({ ...toyOutputs(1, 2, Number(f.input_ids.dims[1])),
    logits: { type: "float32", dims: [1, 3, 0], data: new Float32Array(0) } }) });
  await assert.rejects(compute.runToy(none, [1, 2, 3], [1, 0, 0]), /returned logits of dims \[1,3,0\]/);
});

/**
 * A model split by layer (as the browser's MiniLM), d = 2: the embeddings put token id x at (x, 1); layer l adds to
 * each position the mean of its row's unpadded positions times (l + 1) times the heads on; the last layer pools
 * (the mean of the unpadded positions). A text's numbers depend on its own tokens only, as MiniLM's do (padding
 * is masked), and every layer call is listed as [layer, B, L].
 */
function fakeSplitModel(layers = 3, heads = 2) {
  class Tensor {
    constructor(type, data, dims) {
      Object.assign(this, { type, data, dims });
    }
  }
  const d = 2;
  const layerCalls = [];
  const session = (l) => ({ run: async (f) => {
    const [B, L] = f.hidden.dims;
    layerCalls.push([l, B, L]);
    const on = f.head_mask.data.reduce((a, b) => a + b, 0);
    const out = new Float32Array(B * L * d);
    const pooled = new Float32Array(B * d);
    for (let b = 0; b < B; b++) {
      const real = [...Array(L).keys()].filter((i) => !f.key_padding_mask.data[b * L + i]);
      for (let k = 0; k < d; k++) {
        const mean = real.reduce((s, i) => s + f.hidden.data[(b * L + i) * d + k], 0) / real.length;
        for (let i = 0; i < L; i++) out[(b * L + i) * d + k] = f.hidden.data[(b * L + i) * d + k] + mean * (l + 1) * on;
        pooled[b * d + k] = real.reduce((s, i) => s + out[(b * L + i) * d + k], 0) / real.length;
      }
    }
    const att = new Float32Array(B * heads * L * L).fill(0.5);
    return { hidden_out: new Tensor("float32", out, [B, L, d]), attentions: new Tensor("float32", att, [B, heads, L, L]),
      ...(l === layers - 1 ? { sentence_embedding: new Tensor("float32", pooled, [B, d]) } : {}) };
  } });
  const model = { id: "split.onnx", info: { num_layers: layers, num_heads: heads }, ort: { Tensor }, queue: Promise.resolve(),
    prepare: async () => {}, layerCalls, layer: async (l) => session(l), layerReady: () => true,
    tokenizer: { encode: (text) => ({ ids: [101, ...text.split(" ").map((w) => 1000 + w.length), 102], tokens: [] }) },
    session: { inputNames: ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"], run: async (f) => {
      const [B, L] = f.input_ids.dims;
      const hidden = new Float32Array(B * L * d);
      f.input_ids.data.forEach((x, i) => { hidden[i * d] = Number(x) / 1000; hidden[i * d + 1] = 1; });
      return { hidden: new Tensor("float32", hidden, [B, L, d]) };
    } } };
  return model;
}

test("lengthGroups: texts of near lengths together, the fewest padded positions plus a run's cost", () => {
  const lengths = [13, 10, 16, 12, 12, 13, 14, 10, 11, 13, 15, 12]; // chapter 4's kind of texts
  const padded = (gs) => gs.reduce((s, g) => s + g.length * Math.max(...g.map((i) => lengths[i])), 0);
  for (const cost of [0, 4, CALL_POSITIONS, 1000]) {
    const groups = lengthGroups(lengths, cost);
    assert.deepEqual(groups.flat().sort((a, b) => a - b), lengths.map((_, i) => i)); // every text once
    const one = lengths.length * Math.max(...lengths) + cost;
    assert.ok(padded(groups) + cost * groups.length <= one); // never worse than one batch
  }
  assert.equal(padded(lengthGroups(lengths, 0)), lengths.reduce((a, b) => a + b, 0)); // free runs: no padding
  assert.equal(lengthGroups(lengths, 1000).length, 1); // dear runs: one batch
  assert.deepEqual(lengthGroups([5, 5, 5]), [[0, 1, 2]]);
  assert.deepEqual(lengthGroups([]), []);
});

test("runBert on a model split by layer: texts in length groups, equal to each text alone; a toggle reruns only " +
  "the layers from its own in every group", async () => {
  const texts = ["a bb", "c", "d ee fff gggg hh i jj kk ll", "m n", "o p q r s t u v w x", "yy", "zz z"];
  const grouped = fakeSplitModel();
  const mask = [[1, 1], [1, 1], [1, 1]];
  const r = await runBert(grouped, texts, mask, { maps: false });
  const lengths = texts.map((t) => t.split(" ").length + 2);
  const groups = lengthGroups(lengths);
  assert.ok(groups.length > 1);
  // each layer ran once a group, on the group's own length: fewer positions than one batch padded to the longest
  const positions = grouped.layerCalls.filter(([l]) => l === 0).reduce((s, [, B, L]) => s + B * L, 0);
  assert.equal(grouped.layerCalls.length, 3 * groups.length);
  assert.ok(positions < texts.length * Math.max(...lengths), `${positions} positions`);
  for (const [i, text] of texts.entries()) {
    const alone = await runBert(fakeSplitModel(), [text], mask, { maps: false });
    assert.deepEqual(Array.from(r.embeddings.subarray(2 * i, 2 * i + 2)), Array.from(alone.embeddings), text);
  }
  // text 0's maps, with a sentence run kept beside: a head off in layer 1 reruns layers 1 and 2 of every group
  const m = await runBert(grouped, texts, mask);
  assert.equal(m.attentions.length, 3);
  assert.equal(m.attentions[0][0].length, lengths[0]); // text 0's tokens, padding cut
  await runBert(grouped, ["a sentence of its own"], mask);
  grouped.layerCalls.length = 0;
  const off = [[1, 1], [0, 1], [1, 1]];
  const e = await runBert(grouped, texts, off, { maps: false });
  assert.deepEqual(grouped.layerCalls.map(([l]) => l).sort(), Array(groups.length).fill([1, 2]).flat().sort());
  const fresh = await runBert(fakeSplitModel(), texts, off, { maps: false });
  assert.deepEqual(Array.from(e.embeddings), Array.from(fresh.embeddings));
});

test("a sentence model's maps: row 0 of the texts run, from all B rows (the browser) or row 0 alone (the kernel)", async () => {
  const tokenizer = { encode: (text) => ({ ids: [101, ...text.split(" ").map((w) => 1000 + w.length), 102] }) };
  const texts = ["a bb", "ccc d eeee", "f"]; // 4, 5 and 3 tokens: padded to 5
  for (const rows of [3, 1]) {
    const model = fakeModel({ layers: 2, heads: 3, answer: (f) => {
      const L = Number(f.input_ids.dims[1]);
      return { attentions: { type: "float32", dims: [2, rows, 3, L, L], data: new Float32Array(2 * rows * 3 * L * L).fill(1 / L) },
        sentence_embedding: { type: "float32", dims: [3, 4], data: new Float32Array(12) } };
    } });
    model.tokenizer = tokenizer;
    const r = await runBert(model, texts, null);
    assert.equal(r.attentions.length, 2);
    assert.equal(r.attentions[0].length, 3);
    assert.equal(r.attentions[0][0].length, 4); // text 0's tokens, padding cut
  }
  const wrong = fakeModel({ layers: 2, heads: 3, answer: (f) => {
    const L = Number(f.input_ids.dims[1]);
    return { attentions: { type: "float32", dims: [2, 4, 3, L, L], data: new Float32Array(2 * 4 * 3 * L * L) } };
  } });
  wrong.tokenizer = tokenizer;
  await assert.rejects(runBert(wrong, texts, null), /returned attentions of dims \[2,4,3,5,5\]/);
});
