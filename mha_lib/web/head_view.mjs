// head_view.mjs -- the sentence view's lines (the "head view" of BertViz, Vig 2019): the tokens twice, queries on
// the left and keys on the right, a line from each query to each key for every head shown, its opacity the
// weight and its colour the head's. Pointing at a token (or tapping it, or moving with the arrow keys) shows its
// lines alone; the head buttons above choose the heads. One layer at a time: the sentence view's layer slider.
//
// Data: heads are [{label, layer, head, map: [query][key]}] of one layer, tokens the L labels of both sides.

import { headColour, headViewLayout } from "./layout.mjs";
import { headViewSvg } from "./figure.mjs";
import { el, setText } from "./dom.mjs";
import { shortLabel } from "./text.mjs";
import { sizeCanvas } from "./draw.mjs";
import { headsOf } from "./layer_maps.mjs";
import { t } from "./i18n.mjs";

const LINE_FONT = "12px sans-serif";
const SHOWN_WEIGHT = 0.005; // lines fainter than this are not drawn (a long text's thousands of near-zero pairs)

/**
 * Draw a head view on `ctx` at (x0, y0) with `layout` (layout.mjs's headViewLayout): every head's lines, then the
 * tokens. `focus` ({side: "query"|"key", i}) draws that token's lines alone, its label bold.
 */
export function paintHeadView(ctx, layout, labels, heads, focus, x0 = 0, y0 = 0) {
  const f = layout;
  ctx.save();
  ctx.translate(x0, y0);
  ctx.lineWidth = 2;
  for (const head of heads) {
    ctx.strokeStyle = head.colour;
    head.map.forEach((row, q) => row.forEach((w, k) => {
      if (!(w > SHOWN_WEIGHT)) return;
      if (focus && (focus.side === "query" ? q !== focus.i : k !== focus.i)) return;
      ctx.globalAlpha = Math.min(1, w);
      ctx.beginPath();
      ctx.moveTo(f.left, f.y(q));
      ctx.lineTo(f.right, f.y(k));
      ctx.stroke();
    }));
  }
  ctx.globalAlpha = 1;
  ctx.fillStyle = "#222";
  ctx.textBaseline = "middle";
  labels.forEach((label, i) => {
    const strong = (side) => focus && focus.side === side && focus.i === i;
    ctx.font = strong("query") ? `bold ${LINE_FONT}` : LINE_FONT;
    ctx.textAlign = "right";
    ctx.fillText(label, f.left - 6, f.y(i));
    ctx.font = strong("key") ? `bold ${LINE_FONT}` : LINE_FONT;
    ctx.textAlign = "left";
    ctx.fillText(label, f.right + 6, f.y(i));
  });
  ctx.restore();
}

/** The lines of one layer's heads, with the buttons that choose the heads. */
export class HeadLines {
  /**
   * @param {{readout: HTMLElement}} options  readout: the view's readout line
   */
  constructor({ readout }) {
    this.readout = readout;
    this.chosen = null; // Set of head indices shown; null: all
    this.focus = null; // {side, i} the token pointed at (or pinned)
    this.pinned = false;
    this.keys = el("div", { class: "mha-live-line-heads", role: "group", "aria-label": t("heads shown as lines") });
    this.allButton = el("button", { type: "button", class: "mha-live-button" }, t("All heads"));
    this.allButton.addEventListener("click", () => {
      this.chosen = null;
      this.refresh();
    });
    this.canvas = el("canvas", { tabindex: "0", role: "img", class: "mha-live-lines-canvas" });
    this.note = el("p", { class: "mha-live-note" }, t("Each line joins a query token (left) to a key token (right); " +
      "its opacity is the weight, its colour the head. Point at a token, tap it, or focus the lines and use the arrow " +
      "keys to see its lines alone; the buttons choose the heads."));
    this.node = el("div", { class: "mha-live-lines", hidden: "" }, this.note, this.keys, this.allButton, this.canvas);
    this.wire();
  }

  /** New maps (one layer's heads) of `tokens`: the heads chosen stay chosen where the layer has them. */
  show(tokens, heads) {
    const fresh = tokens !== this.tokens;
    this.tokens = tokens;
    this.heads = heads;
    if (fresh) {
      this.focus = null;
      this.pinned = false;
    }
    if (this.chosen) this.chosen = new Set([...this.chosen].filter((h) => h < heads.length));
    this.refresh();
  }

  /** The heads drawn: the chosen ones, each with its colour. */
  shownHeads() {
    return this.heads.map((h, i) => ({ ...h, index: i, colour: headColour(i) }))
      .filter((h) => !this.chosen || this.chosen.has(h.index));
  }

  /** Rebuild the head buttons (a new layer, a new choice) and draw. */
  refresh() {
    if (!this.heads) return;
    const buttons = this.heads.map((h, i) => {
      const on = !this.chosen || this.chosen.has(i);
      const swatch = el("span", { class: "mha-live-swatch", "aria-hidden": "true" });
      swatch.style.background = headColour(i);
      const button = el("button", { type: "button", class: "mha-live-button mha-live-line-head",
        "aria-pressed": on ? "true" : "false" }, swatch, h.label.split(" · ")[0].replace(/^L\d+\./, ""));
      button.addEventListener("click", () => {
        const next = new Set(this.chosen || this.heads.map((_, j) => j));
        if (next.has(i)) next.delete(i);
        else next.add(i);
        this.chosen = next.size === this.heads.length ? null : next;
        this.refresh();
        const again = this.keys.children[i];
        if (again) again.focus();
      });
      return button;
    });
    this.keys.replaceChildren(...buttons);
    this.allButton.disabled = !this.chosen;
    this.draw();
  }

  /** Draw for the box's width (the canvas is as tall as the tokens need). */
  draw() {
    if (!this.tokens || this.node.hidden) return;
    const width = this.node.clientWidth || 560;
    const probe = this.canvas.getContext("2d");
    probe.font = `bold ${LINE_FONT}`;
    this.labels = this.tokens.map((token) => shortLabel(token, 14));
    const labelWidth = Math.max(...this.labels.map((x) => probe.measureText(x).width));
    const coarse = typeof matchMedia === "function" && matchMedia("(pointer: coarse)").matches;
    this.layout = headViewLayout(this.tokens.length, width, labelWidth, coarse ? 30 : 22);
    const ctx = sizeCanvas(this.canvas, this.layout.width, this.layout.height);
    paintHeadView(ctx, this.layout, this.labels, this.shownHeads(), this.focus);
    const layer = this.heads[0] ? this.heads[0].layer : 0;
    this.canvas.setAttribute("aria-label", t("lines of layer {layer}: {count} heads shown over {n} tokens; the arrow " +
      "keys pick a query token", { layer, count: this.shownHeads().length, n: this.tokens.length }));
  }

  /** The token under a pointer event: {side, i}, or null. */
  tokenAt(event) {
    if (!this.layout) return null;
    const box = this.canvas.getBoundingClientRect();
    const x = event.clientX - box.left;
    const i = Math.floor((event.clientY - box.top - this.layout.top) / this.layout.row);
    if (i < 0 || i >= this.tokens.length) return null;
    return { side: x < this.layout.width / 2 ? "query" : "key", i };
  }

  /** Point at `focus` (or nothing): its lines alone, and the readout says where its weight goes. */
  point(focus) {
    const same = (a, b) => (a && b ? a.side === b.side && a.i === b.i : a === b);
    if (same(focus, this.focus)) return;
    this.focus = focus;
    this.draw();
    if (focus) setText(this.readout, this.describe(focus));
  }

  /** "Query “she”: H1 → anna 0.52 · H4 → she 0.31": each head's strongest pair of the token pointed at. */
  describe({ side, i }) {
    const parts = this.shownHeads().map((h) => {
      let best = 0;
      const weight = (j) => (side === "query" ? h.map[i][j] : h.map[j][i]);
      for (let j = 1; j < this.tokens.length; j++) if (weight(j) > weight(best)) best = j;
      const name = h.label.split(" · ")[0];
      return side === "query" ? `${name} → ${this.tokens[best]} ${weight(best).toFixed(2)}`
        : `${name} ← ${this.tokens[best]} ${weight(best).toFixed(2)}`;
    });
    const words = { token: this.tokens[i], heads: parts.join(" · ") || t("no head shown") };
    return side === "query" ? t("Query “{token}”, its strongest key per head: {heads}", words)
      : t("Key “{token}”, its strongest query per head: {heads}", words);
  }

  wire() {
    this.canvas.addEventListener("pointermove", (event) => {
      if (event.pointerType === "touch" || this.pinned) return;
      this.point(this.tokenAt(event));
    });
    this.canvas.addEventListener("pointerleave", () => {
      if (!this.pinned) this.point(null);
    });
    this.canvas.addEventListener("click", (event) => { // a tap (or a click) pins a token; again, or elsewhere, frees it
      const at = this.tokenAt(event);
      const same = at && this.focus && this.pinned && at.side === this.focus.side && at.i === this.focus.i;
      this.pinned = Boolean(at) && !same;
      this.focus = null;
      this.point(this.pinned ? at : null);
    });
    this.canvas.addEventListener("keydown", (event) => {
      if (!this.tokens) return;
      const n = this.tokens.length;
      const i = this.focus ? this.focus.i : -1;
      const side = this.focus ? this.focus.side : "query";
      const moves = { ArrowDown: [side, Math.min(n - 1, i + 1)], ArrowUp: [side, Math.max(0, i - 1)],
        ArrowLeft: ["query", Math.max(0, i)], ArrowRight: ["key", Math.max(0, i)] };
      if (event.key in moves) {
        event.preventDefault();
        this.pinned = true;
        this.point({ side: moves[event.key][0], i: moves[event.key][1] });
      } else if (event.key === "Escape") {
        event.preventDefault();
        this.pinned = false;
        this.point(null);
      }
    });
  }

  /**
   * The lines shown, for the export (view.mjs's download): the figure of figure.mjs with its own SVG and canvas.
   * @param {string} model  the model's id; input: the text of the maps
   */
  exportFigure(model, input, source, view) {
    const heads = this.shownHeads();
    const layer = this.heads[0] ? this.heads[0].layer : 0;
    const query = this.pinned && this.focus && this.focus.side === "query" ? this.focus.i : null; // a pinned token
    const title = [t("{model}: lines of layer {layer} ({count} heads)", { model, layer, count: heads.length }),
      t("Input: “{input}”", { input: shortLabel(input, 120) }),
      query === null ? t("A line per query and key; opacity = weight, colour = head.")
        : t("The lines of query “{token}”; opacity = weight, colour = head.", { token: this.tokens[query] })];
    const figure = { name: [model, `L${layer}`, "lines"], title, tokens: this.tokens, query, vmax: 1,
      heads: heads.map((h) => ({ label: h.label, tokens: this.tokens, map: h.map, off: false, colour: h.colour })),
      data: { view, mode: "lines", model, text: input, tokens: this.tokens, layer, source,
        heads: heads.map((h) => ({ label: h.label, colour: h.colour, attention: h.map })) } };
    figure.toSvg = () => headViewSvg(figure);
    figure.toCanvas = () => this.exportCanvas(figure);
    return figure;
  }

  /** The export as a canvas, twice its size: the title and the head key above the lines (as the SVG). */
  exportCanvas(figure) {
    const labels = this.tokens.map((x) => String(x));
    const probe = this.canvas.getContext("2d");
    probe.font = LINE_FONT;
    const layout = headViewLayout(labels.length, 560, Math.max(...labels.map((x) => probe.measureText(x).width)));
    const pad = 16;
    const keyHeight = 18 * Math.ceil(figure.heads.length / 6);
    const top = pad + 18 * figure.title.length + 8 + keyHeight + 8;
    const width = layout.width + 2 * pad;
    const height = top + layout.height + pad;
    const scale = Math.min(2, 8192 / Math.max(width, height));
    const canvas = document.createElement("canvas");
    canvas.width = Math.round(width * scale);
    canvas.height = Math.round(height * scale);
    const ctx = canvas.getContext("2d");
    ctx.scale(scale, scale);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, width, height);
    ctx.fillStyle = "#222";
    figure.title.forEach((line, i) => {
      ctx.font = `${i ? 12 : 14}px sans-serif`;
      ctx.fillText(line, pad, pad + 14 + 18 * i);
    });
    ctx.font = "12px sans-serif";
    figure.heads.forEach((head, i) => {
      const x = pad + (i % 6) * 90;
      const y = pad + 18 * figure.title.length + 8 + 18 * Math.floor(i / 6);
      ctx.fillStyle = head.colour;
      ctx.fillRect(x, y, 12, 12);
      ctx.fillStyle = "#222";
      ctx.fillText(head.label, x + 16, y + 11);
    });
    const focus = figure.query === null ? null : { side: "query", i: figure.query };
    paintHeadView(ctx, layout, labels, figure.heads, focus, pad, top);
    return canvas;
  }
}

/**
 * The sentence view's choice between its maps and its lines: a "Maps | Lines" switch, and the lines of the layer the
 * slider shows (the lines show one layer: "all layers" is unticked when they are chosen). `view` is a SentenceView
 * (its maps: a LayerMaps, its readout and zoom). Returns {control, node, show(), draw(), active, exportFigure()}.
 */
export function linesMode(view) {
  const maps = view.maps;
  const lines = new HeadLines({ readout: view.readout });
  let mode = "maps";
  const buttons = [["maps", t("Maps")], ["lines", t("Lines (head view)")]].map(([value, text]) => {
    const button = el("button", { type: "button", class: "mha-live-button", "aria-pressed": value === mode ? "true" : "false" },
      text);
    button.addEventListener("click", () => choose(value));
    return button;
  });
  const control = el("div", { class: "mha-live-controls", role: "group", "aria-label": t("show the heads as") },
    el("span", {}, t("Show the heads as")), el("span", { class: "mha-live-pair" }, ...buttons)); // one toggle: never split
  const layer = () => Number(maps.control.slider.value);
  const show = () => {
    if (mode !== "lines" || !maps.attentions) return;
    const heads = headsOf(maps.attentions, Math.min(layer(), maps.attentions.length - 1), null, maps.roles)[0];
    lines.show(maps.tokens, heads);
  };
  const choose = (value) => {
    mode = value;
    buttons.forEach((b, i) => b.setAttribute("aria-pressed", (i === 0) === (value === "maps") ? "true" : "false"));
    const all = maps.control.all;
    all.closest("label").hidden = value === "lines"; // the lines show one layer
    if (value === "lines" && all.checked) {
      all.checked = false;
      all.dispatchEvent(new Event("change"));
    }
    maps.node.hidden = value === "lines";
    lines.node.hidden = value !== "lines";
    view.legend.node.hidden = value === "lines"; // the maps' colour scale: the lines' opacity is their own
    if (value === "lines") view.zoom.node.hidden = true;
    view.clearReadout();
    show();
  };
  maps.control.slider.addEventListener("input", show);
  return {
    control, node: lines.node, lines, show,
    draw: () => lines.draw(),
    get active() {
      return mode === "lines";
    },
    exportFigure: () => lines.exportFigure(view.shownModelId, maps.input, view.result.source, view.element.dataset.view),
  };
}
