// Tests of chapter 2's step-by-step view (steps.mjs) and the sentence view's lines (layout.mjs, figure.mjs).
// Run: node --test mha_lib/web/test/
//
// The cases marked "mha_lib" compare with what mha_lib computes (./fixture.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { fixture } from "./fixture.mjs";
import { causalMask, checkStepsInput, FILE_STAGES, HEAD_STAGES, headStages, markedText, parseMarked, STEPS,
  stepMatrices, stepsFigure, stepsId, transpose } from "../steps.mjs";
import { divergingOf, headColour, headViewLayout, labelledMap, largestAbs, RDBU } from "../layout.mjs";
import { cellColour, figureCsv, figureSvg, headViewSvg } from "../figure.mjs";

/** The fixture's outputs as a session gives them: typed arrays (bool as bytes). */
function asOutputs(outputs) {
  return Object.fromEntries(Object.entries(outputs).map(([name, o]) => [name, { dims: o.dims, type: o.type,
    data: o.type === "bool" ? Uint8Array.from(o.data) : Float32Array.from(o.data) }]));
}

const close = (a, b, tol, what) => {
  assert.equal(a.length, b.length, `${what}: rows`);
  let worst = 0;
  a.forEach((row, i) => {
    assert.equal(row.length, b[i].length, `${what}: row ${i}`);
    row.forEach((v, j) => { worst = Math.max(worst, Math.abs(v - b[i][j])); });
  });
  assert.ok(worst <= tol, `${what}: ${worst} > ${tol}`);
};

test("one head's stages read from the steps file's outputs equal mha_lib.live.steps_readings (mha_lib)", () => {
  assert.ok(fixture.steps.length >= 3);
  for (const c of fixture.steps) {
    assert.deepEqual(Object.keys(c.outputs), FILE_STAGES);
    const got = headStages(asOutputs(c.outputs), c.head);
    assert.deepEqual(Object.keys(got), HEAD_STAGES);
    for (const name of HEAD_STAGES) close(got[name], c.readings[name], 1e-6, `${name} (head ${c.head})`);
    // the map is a softmax: rows sum to 1; a causal case blocks exactly the keys after each query
    got.weights.forEach((row) => assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-5));
    const L = got.weights.length;
    const mask = causalMask(L, c.causal);
    got.blocked.forEach((row, q) => row.forEach((b, k) => assert.equal(b, mask[q * L + k], `blocked[${q}][${k}]`)));
  }
});

test("a head outside the layer, or a missing output, is refused by name", () => {
  const c = fixture.steps[0];
  const out = asOutputs(c.outputs);
  assert.throws(() => headStages(out, 4), /head 4 is not one of the layer's 4 heads/);
  const { contributions, ...rest } = out;
  assert.ok(contributions);
  assert.throws(() => headStages(rest, 0), /gave no contributions/);
});

test("every step's matrices: their shapes, one colour scale per step, the mask grey, head h's columns marked", () => {
  const c = fixture.steps[1]; // causal
  const s = headStages(asOutputs(c.outputs), c.head);
  const L = s.q.length;
  const sizes = { head: c.head, d_k: s.q[0].length, num_heads: 4, d_model: s.x[0].length };
  const shapes = {};
  for (const step of STEPS) {
    const list = stepMatrices(step.id, s, sizes);
    assert.ok(list.length >= 1 && list.some((m) => m.result), step.id);
    for (const m of list) {
      if (m.placeholder) {
        assert.deepEqual([m.rows, m.cols, m.band], [4 * sizes.d_k, sizes.d_model, { from: c.head * sizes.d_k, to: (c.head + 1) * sizes.d_k }]);
        continue;
      }
      shapes[`${step.id}.${m.key}`] = [m.values.length, m.values[0].length];
      assert.ok(m.vmax > 0);
    }
  }
  assert.deepEqual(shapes["scores.kT"], [sizes.d_k, L]);
  assert.deepEqual(shapes["scores.scores"], [L, L]);
  assert.deepEqual(shapes["output.out"], [L, sizes.d_model]);
  assert.deepEqual(transpose(transpose(s.k)), s.k);
  const [masked] = stepMatrices("mask", s, sizes);
  assert.equal(masked.values[0][1], -Infinity); // causal: key 1 is after query 0
  assert.deepEqual(cellColour({ map: masked.values, blocked: masked.blocked, signed: true }, 0, 1, 1), [187, 187, 187]);
  const [, , product] = stepMatrices("scores", s, sizes);
  // S = Q K^T, entry by entry
  const dot = (i, j) => s.q[i].reduce((a, v, d) => a + v * s.k[j][d], 0);
  assert.ok(Math.abs(product.values[L - 1][0] - dot(L - 1, 0)) < 1e-3);
});

test("the export of the steps: one matrix per stage, CSV rows of every cell, an SVG with the reader's text escaped", () => {
  const c = fixture.steps[1];
  const stages = headStages(asOutputs(c.outputs), c.head);
  const tokens = stages.x.map((_, i) => `t${i}`);
  const figure = stepsFigure({ model: "ch1-h4", layer: 0, head: c.head, causal: true, input: "<b>& “x”", tokens, stages,
    source: "browser", sizes: { d_model: stages.x[0].length, d_k: stages.q[0].length } });
  assert.equal(figure.heads.length, 12);
  assert.deepEqual(figure.name, ["ch1-h4", "L0", `H${c.head}`, "steps"]);
  const csv = figureCsv(figure).split("\n");
  assert.equal(csv[0], "\uFEFFstage,off,row,column,row_token,column_label,value");
  const cells = figure.heads.reduce((n, h) => n + h.map.length * h.map[0].length, 0);
  assert.equal(csv.length - 2, cells);
  assert.ok(csv.some((line) => line.endsWith(",-Infinity"))); // the masked scores, blocked
  const svg = figureSvg(figure, () => "data:image/png;base64,");
  assert.ok(svg.includes("&lt;b&gt;&amp; “x”") && !svg.includes("<b>"));
  assert.equal(figure.data.stages.weights, stages.weights);
});

test("the steps view's input: texts, toy sequences with a star, named refusals", () => {
  assert.deepEqual(parseMarked("3 *5 1 0", 8, 16), { ids: [3, 5, 1, 0], types: [0, 1, 0, 0] });
  assert.deepEqual(parseMarked(" 7,*0 ", 8, 16), { ids: [7, 0], types: [0, 1] });
  assert.throws(() => parseMarked("3 9 *1", 8, 16), /token 1 is “9”, not a number in 0..7/);
  assert.throws(() => parseMarked("3 5 1", 8, 16), /0 tokens are marked with a star; mark exactly one/);
  assert.throws(() => parseMarked("*1 *2", 8, 16), /2 tokens are marked/);
  assert.throws(() => parseMarked("", 8, 16), /the sequence has 0 tokens; give 1 to 16/);
  assert.equal(markedText([3, 5, 1], [0, 1, 0]), "3 *5 1");
  const toy = { kind: "toy", num_layers: 1, num_heads: 4, max_tokens: 16, task: { vocab_size: 8 } };
  const now = { layer: 0, head: 1, causal: false, ids: [1, 2], types: [1, 0] };
  assert.deepEqual(checkStepsInput({ head: 3 }, toy, now), { layer: 0, head: 3, causal: false, ids: [1, 2], types: [1, 0] });
  assert.deepEqual(checkStepsInput("*4 4", toy, now), { layer: 0, head: 1, causal: false, ids: [4, 4], types: [1, 0] });
  assert.deepEqual(checkStepsInput({ ids: [0], types: [1], causal: true }, toy, now),
    { layer: 0, head: 1, causal: true, ids: [0], types: [1] });
  for (const [bad, message] of [
    [{ head: 4 }, "head must be an integer in 0..3, got 4"], [{ layer: 1 }, "layer must be an integer in 0..0, got 1"],
    [{ causal: "yes" }, 'causal must be true or false, got "yes"'], [{ ids: [8], types: [1] }, "ids[0] = 8 is not a token in 0..7"],
    [{ ids: [1, 2], types: [1, 1] }, "types must mark exactly one position with 1"], [{ steps: 3 }, 'unknown key "steps"'],
    [42, "takes a text, or {ids, types, layer, head, causal}, got number"], [null, "got null"]]) {
    assert.throws(() => checkStepsInput(bad, toy, now), (err) => err.message.includes(message), message);
  }
  const bert = { kind: "bert", num_layers: 6, num_heads: 12, max_tokens: 256 };
  const text = { layer: 3, head: 1, causal: false, text: "old" };
  assert.deepEqual(checkStepsInput("new text", bert, text), { ...text, text: "new text" });
  assert.deepEqual(checkStepsInput({ layer: 5 }, bert, text), { ...text, layer: 5 });
  assert.throws(() => checkStepsInput({ ids: [1], types: [0] }, bert, text), /MiniLM reads a text/);
  assert.throws(() => checkStepsInput({ text: 5 }, bert, text), /text must be a string, got number/);
  assert.equal(stepsId("all-MiniLM-L6-v2", 3), "all-MiniLM-L6-v2.attn3");
});

test("colours of signed values: RdBu_r ends and middle, symmetric, clipped; largestAbs; head colours", () => {
  assert.deepEqual(divergingOf(-2, 2), RDBU[0]);
  assert.deepEqual(divergingOf(2, 2), RDBU[RDBU.length - 1]);
  assert.deepEqual(divergingOf(0, 2), RDBU[5]);
  assert.deepEqual(divergingOf(99, 2), RDBU[RDBU.length - 1]);
  assert.deepEqual(divergingOf(NaN, 2), RDBU[5]);
  assert.equal(largestAbs([[1, -3], [2, -Infinity]]), 3);
  assert.equal(largestAbs([[0]]), 1);
  assert.equal(headColour(0), headColour(12));
  assert.notEqual(headColour(0), headColour(1));
});

test("token labels on a thumbnail only where its cells stay at least 10 px and the labels leave it room", () => {
  assert.deepEqual(labelledMap(220, 15, 40), { labels: true, margin: 46, cell: (220 - 46) / 15 });
  assert.equal(labelledMap(105, 15, 40).labels, false); // the sentence view's thumbnails at 1280 px: too small
  assert.equal(labelledMap(110, 4, 60).labels, false); // labels wider than the map leaves
  assert.equal(labelledMap(110, 16, 10).labels, false);
  assert.equal(labelledMap(110, 4, 20).cell, (110 - 26) / 4);
});

test("head view: its layout fits the column, and its SVG has a line per pair above the opacity floor", () => {
  const f = headViewLayout(5, 358, 80);
  assert.ok(f.width <= 358 && f.left < f.right && f.left > 80 && f.right + 80 <= f.width);
  assert.equal(f.y(0), f.top + f.row / 2);
  const map = [[1, 0], [0.5, 0.5]];
  const svg = headViewSvg({ title: ["t <1>"], tokens: ["a&b", "c"], query: null,
    heads: [{ label: "L0.H0", colour: headColour(0), map }, { label: "L0.H1", colour: headColour(1), map: [[0.001, 0.999], [0, 1]] }] });
  assert.equal((svg.match(/<line /g) || []).length, 3 + 2);
  assert.ok(svg.includes("a&amp;b") && svg.includes("t &lt;1&gt;"));
  const one = headViewSvg({ title: ["x"], tokens: ["a", "b"], query: 1, heads: [{ label: "H0", colour: "#000", map }] });
  assert.equal((one.match(/<line /g) || []).length, 2); // query 1's lines only
});
