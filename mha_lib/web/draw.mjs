// draw.mjs -- drawing: maps on canvas, the grid of heads, the enlarged head, the colour scale.
//
// Data shapes: a map is [query][key] weights in [0, 1]; tokens are the L row and column labels; a
// head is {label, map, off, ink?, keyTokens?} (off: turned off by the head mask, drawn grey; ink:
// [row][column] booleans, marked with a dot: the digit view's strokes under its pixel maps; keyTokens:
// the column labels of a map that is not square, e.g. cross-attention's L_target x S_source).
//
// A grid or an enlarged map says what a cell is through `words` (default: attention between tokens):
//   {cell(head, tokens, q, k) -> readout text, map(head, n) -> a map's accessible name, axes -> the enlarged
//   map's "rows are ..., columns are ...", labels?: true where a thumbnail may write its tokens}.

/** The column labels of `head`'s map: its own keyTokens, else the row labels (a square map). */
export const keysOf = (head, tokens) => head.keyTokens || tokens;

import { colourOf, greyOf, gridLayout, labelledMap, rowEnd, zoomLayout } from "./layout.mjs";
import { cellColour, figureLayout } from "./figure.mjs";
import { el, setText } from "./dom.mjs";
import { readoutText, shortLabel } from "./text.mjs";
import { t } from "./i18n.mjs";

/**
 * A map's cells as a rows x columns canvas, one pixel a cell (grey when the head is off); `into` is reused when given.
 * With `head` (figure.mjs's cellColour: a signed matrix, masked cells, its own vmax), its colours.
 */
export function bitmapOf(map, vmax, off, into = null, head = null) {
  const n = map.length;
  const m = map[0].length;
  const image = new ImageData(m, n);
  const colour = off ? greyOf : colourOf;
  for (let q = 0; q < n; q++) {
    for (let k = 0; k < m; k++) {
      const [r, g, b] = head ? cellColour(head, q, k, vmax) : colour(map[q][k], vmax);
      const p = (q * m + k) * 4;
      image.data[p] = r;
      image.data[p + 1] = g;
      image.data[p + 2] = b;
      image.data[p + 3] = 255;
    }
  }
  const bitmap = into || document.createElement("canvas");
  if (bitmap.width !== m) bitmap.width = m;
  if (bitmap.height !== n) bitmap.height = n;
  bitmap.getContext("2d").putImageData(image, 0, 0);
  return bitmap;
}

let scratch = null; // the one L x L canvas that every map is painted through (made once, not once a map)

/**
 * Paint a map's cells into a bitmap (one pixel a cell), then scale it onto `canvas` at (x, y): `size` px for
 * its longer side, square cells (a map that is not square leaves the rest of the size x size box empty).
 */
export function paintMap(ctx, map, vmax, off, x, y, size, head = null) {
  scratch = scratch || document.createElement("canvas");
  ctx.imageSmoothingEnabled = false;
  const cell = size / Math.max(map.length, map[0].length);
  ctx.drawImage(bitmapOf(map, vmax, off, scratch, head), x, y, cell * map[0].length, cell * map.length);
}

/**
 * An export's figure (figure.mjs) drawn on a new canvas at twice its size (a PNG sharp in print): the
 * same layout as the SVG.
 */
export function figureCanvas(figure) {
  const length = Math.max(...figure.heads.map((h) => Math.max(h.tokens.length, (h.keyTokens || h.tokens).length)));
  const f = figureLayout(figure.heads.length, length, figure.title.length);
  const canvas = document.createElement("canvas");
  // twice the size, within 8192 px a side and 16 million pixels (the largest canvas some phones allow)
  const scale = Math.min(2, 8192 / Math.max(f.width, f.height), Math.sqrt(16e6 / (f.width * f.height)));
  canvas.width = Math.round(f.width * scale);
  canvas.height = Math.round(f.height * scale);
  const ctx = canvas.getContext("2d");
  ctx.scale(scale, scale);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, f.width, f.height);
  ctx.fillStyle = "#222";
  figure.title.forEach((line, i) => {
    ctx.font = `${i ? 12 : 14}px sans-serif`;
    ctx.fillText(line, f.pad, f.pad + 14 + 18 * i);
  });
  ctx.font = "12px sans-serif";
  figure.heads.forEach((head, i) => {
    const { x, y } = f.at(i);
    paintMap(ctx, head.map, figure.vmax, head.off, x, y, f.side, head);
    ctx.fillText(head.off ? t("{label} (off)", { label: head.label }) : head.label, x, y + f.side + 14);
  });
  return canvas;
}

/**
 * Size a canvas for `w` x `h` CSS px (square unless h given) at the screen's pixel density, its bitmap at
 * most 4096 px a side (a long map on a phone would pass the largest canvas some browsers allow).
 */
export function sizeCanvas(canvas, w, h = w) {
  const dpr = Math.min(window.devicePixelRatio || 1, 4096 / Math.max(w, h));
  const [width, height] = [Math.round(w * dpr), Math.round(h * dpr)];
  const ctx = canvas.getContext("2d");
  canvas.style.width = `${w}px`; // always: past the 4096 px cap, two CSS sizes share one bitmap size
  canvas.style.height = `${h}px`;
  if (canvas.width !== width || canvas.height !== height) { // a new size clears the canvas; the same size keeps its memory
    canvas.width = width;
    canvas.height = height;
  } else {
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, width, height);
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

/**
 * What a map's cells are, in words (see the top of this file).
 * @typedef {{labels?: boolean, cell: (head: object, tokens: string[], q: number, k: number) => string,
 *   map: (head: object, n: number) => string, readonly axes: string}} MapWords
 */

/**
 * The words of a map of token-to-token attention (see the top of this file).
 * @type {MapWords}
 */
export const TOKEN_WORDS = {
  labels: true, // a thumbnail with room for them writes its row and column tokens (HeadGrid)
  cell: (head, tokens, q, k) => readoutText(head.label, tokens, q, k, head.map[q][k], keysOf(head, tokens)),
  map: (_head, n) => t("attention map of {n} tokens", { n }),
  get axes() {
    return t("rows are queries, columns are keys");
  },
};

/** Dots on the cells of `ink` ([row][column] booleans) of a map drawn at (x, y), `size` px a side. */
function paintInk(ctx, ink, x, y, size) {
  if (!ink) return;
  const cell = size / ink.length;
  ctx.lineWidth = 1;
  ink.forEach((row, q) => row.forEach((on, k) => {
    if (!on) return;
    ctx.beginPath();
    ctx.arc(x + (k + 0.5) * cell, y + (q + 0.5) * cell, Math.max(1.5, cell * 0.14), 0, 2 * Math.PI);
    ctx.fillStyle = "#fff";
    ctx.fill();
    ctx.strokeStyle = "#000";
    ctx.stroke();
  }));
}

/** The cell under a pointer event on a map of n rows and m columns drawn at `origin` with `cell` px cells, or null. */
function cellAt(event, canvas, origin, cell, n, m = n) {
  const box = canvas.getBoundingClientRect();
  const k = Math.floor((event.clientX - box.left - origin) / cell);
  const q = Math.floor((event.clientY - box.top - origin) / cell);
  return q >= 0 && k >= 0 && q < n && k < m ? { q, k } : null;
}

/**
 * A grid of head maps, one focusable button per head, and an enlarged view of one head.
 * heads: [{label, map: [q][k], off}], tokens: [L].
 */
export class HeadGrid {
  /**
   * @param {{readout: HTMLElement, minMap?: number, sameSizeAs?: number|null, words?: MapWords}} options  readout: the
   *   line a pointed cell is read into; minMap: the smallest map side in px; words: what a cell is
   */
  constructor({ readout, minMap = 110, sameSizeAs = null, words = TOKEN_WORDS }) {
    this.readout = readout;
    this.words = words;
    this.minMap = minMap;
    this.sameSizeAs = sameSizeAs; // lay out as if this many heads were shown (side-by-side models)
    this.node = el("div", { class: "mha-live-grid" });
    this.heads = [];
    this.tokens = [];
    this.vmax = 1;
    this.buttons = []; // one per head; the grid may also hold the enlarged map (placeZoom)
    this.columns = 1;
    this.zoomed = null; // {node, index}: the enlarged map placed in this grid, under the row of head `index`
    /** @type {((index: number) => void)|null} told the head whose map button was pressed (its view enlarges it) */
    this.onEnlarge = null;
  }

  /** Put the enlarged map `node` in this grid, on a row of its own under the row of head `index`. */
  placeZoom(node, index) {
    this.zoomed = { node, index };
    const anchor = this.buttons[rowEnd(Math.min(index, this.buttons.length - 1), this.columns, this.buttons.length)];
    if (anchor.nextSibling !== node) anchor.after(node);
  }

  /** Draw `heads` (replacing what was there), colour scale 0 .. vmax, in a column `width` px wide (read by the caller). */
  show(heads, tokens, vmax, width = null) {
    this.heads = heads;
    this.tokens = tokens;
    this.vmax = vmax;
    this.draw(width);
  }

  /** @param {number|null} width  the column's width in px; null reads it from the page (a layout) */
  draw(width = null) {
    if (width === null) width = this.node.parentNode ? this.node.parentNode.clientWidth : 600;
    const n = this.tokens.length;
    if (!this.heads.length || !n) return;
    const side = Math.max(n, ...this.heads.map((h) => keysOf(h, this.tokens).length)); // cells along the longer side
    const layout = gridLayout({ width, count: this.sameSizeAs || this.heads.length, length: side, minMap: this.minMap });
    this.node.style.gridTemplateColumns = `repeat(${layout.columns}, ${layout.map}px)`;
    this.columns = layout.columns;
    const fit = this.labelFit(layout.map, side); // token labels on every map, where the maps have room for them
    // reuse the buttons: a redraw after typing must not lose the keyboard focus
    while (this.buttons.length > this.heads.length) this.buttons.pop().remove();
    this.heads.forEach((head, i) => {
      let button = this.buttons[i];
      if (!button) {
        button = el("button", { type: "button", class: "mha-live-head" }, el("canvas"), el("span"));
        this.wire(button, i);
        if (i > 0) this.buttons[i - 1].after(button);
        else this.node.prepend(button);
        this.buttons.push(button);
      }
      const [canvas, caption] = button.children;
      setText(caption, head.off ? t("{label} (off)", { label: head.label }) : head.label);
      const words = { label: head.label, map: this.words.map(head, n) };
      button.setAttribute("aria-label", head.off ? t("{label}, turned off: {map}; Enter enlarges it", words)
        : t("{label}: {map}; Enter enlarges it", words));
      const m = keysOf(head, this.tokens).length;
      const { margin, cell } = fit;
      const ctx = sizeCanvas(canvas, margin + cell * m, margin + cell * n);
      paintMap(ctx, head.map, this.vmax, head.off, margin, margin, cell * Math.max(n, m));
      paintInk(ctx, head.ink, margin, margin, cell * n);
      if (fit.labels) paintLabels(ctx, fit.rows, fit.keys(head), margin, cell);
      button.dataset.cell = String(cell);
      button.dataset.origin = String(margin);
    });
    // the enlarged map stays under its head's row (the number of columns may have changed)
    if (this.zoomed && this.zoomed.node.parentNode === this.node) this.placeZoom(this.zoomed.node, this.zoomed.index);
  }

  /**
   * Whether maps `size` px wide with `side` cells have room for their token labels (TOKEN_WORDS: rows on the left,
   * columns on top, 10 px type), measured once per draw: {labels, margin, cell, rows, keys(head)}.
   */
  labelFit(size, side) {
    const plain = { labels: false, margin: 0, cell: size / side };
    if (!this.words.labels) return plain;
    const rows = this.tokens.map((token) => shortLabel(token, 8));
    const keyLabels = new Map(); // a map that is not square: its own column labels
    const keys = (head) => {
      const list = keysOf(head, this.tokens);
      if (list === this.tokens) return rows;
      if (!keyLabels.has(list)) keyLabels.set(list, list.map((token) => shortLabel(token, 8)));
      return keyLabels.get(list);
    };
    this.probe = this.probe || document.createElement("canvas").getContext("2d");
    const probe = this.probe;
    probe.font = LABEL_FONT;
    const all = [...rows, ...this.heads.flatMap((h) => keys(h))];
    const width = Math.max(...all.map((label) => probe.measureText(label).width));
    const fit = labelledMap(size, side, width);
    return fit.labels ? { ...fit, rows, keys } : plain;
  }

  /** The small note by the pointer that names the cell under it (the readout above says it too, for screen readers). */
  tipAt(event, text) {
    if (!this.tip) {
      this.tip = el("div", { class: "mha-live-tip", "aria-hidden": "true", hidden: "" });
      this.node.append(this.tip);
    }
    const box = this.node.getBoundingClientRect();
    const x = event.clientX - box.left;
    setText(this.tip, text);
    this.tip.hidden = false;
    this.tip.style.left = `${Math.round(x)}px`;
    this.tip.style.top = `${Math.round(event.clientY - box.top + 16)}px`;
    this.tip.classList.toggle("mha-live-tip-left", x > box.width / 2); // on the right half: it opens leftwards
  }

  wire(button, i) {
    const canvas = button.firstChild;
    const show = (event) => {
      // on a touch screen a tap enlarges the map (click); its cells are read in the enlarged map
      if (event.pointerType === "touch") return;
      const head = this.heads[i];
      const at = head && cellAt(event, canvas, Number(button.dataset.origin || 0), Number(button.dataset.cell),
        this.tokens.length, keysOf(head, this.tokens).length);
      if (head && at) {
        const text = this.words.cell(head, this.tokens, at.q, at.k);
        setText(this.readout, text);
        this.tipAt(event, text);
      } else if (this.tip) {
        this.tip.hidden = true;
      }
    };
    canvas.addEventListener("pointermove", show);
    canvas.addEventListener("pointerdown", show); // a pen or mouse press (touch: see above)
    canvas.addEventListener("pointerleave", () => { if (this.tip) this.tip.hidden = true; });
    button.addEventListener("click", () => this.onEnlarge?.(i));
  }
}

const LABEL_FONT = "10px sans-serif";

/**
 * Token labels around a map drawn at (margin, margin) with `cell` px cells: `rows` right-aligned on its left,
 * `columns` written upwards above it (the enlarged map's way).
 */
export function paintLabels(ctx, rows, columns, margin, cell) {
  ctx.save();
  ctx.fillStyle = "#222";
  ctx.font = LABEL_FONT;
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  rows.forEach((label, i) => ctx.fillText(label, margin - 3, margin + (i + 0.5) * cell));
  ctx.textAlign = "left";
  columns.forEach((label, i) => {
    ctx.save();
    ctx.translate(margin + (i + 0.5) * cell, margin - 3);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(label, 0, 0);
    ctx.restore();
  });
  ctx.restore();
}

/** One head enlarged: token labels on both axes, a cursor cell moved by the arrow keys. */
export class ZoomView {
  constructor({ readout, onClose }) {
    this.readout = readout;
    this.title = el("p", { class: "mha-live-zoom-title" });
    this.canvas = el("canvas", { tabindex: "0", role: "img" });
    const close = el("button", { type: "button", class: "mha-live-button" }, t("Close the enlarged map"));
    close.addEventListener("click", () => onClose());
    // a long input's map is larger than the column: it scrolls inside this box, both ways
    this.scroller = el("div", { class: "mha-live-zoom-scroll" }, this.canvas);
    // the cell under the pointer or cursor, said again right under the map: the view's own readout
    // (the live region) sits above the maps, off screen on a phone once a map is enlarged
    this.cellText = el("p", { class: "mha-live-zoom-readout" });
    this.node = el("div", { class: "mha-live-zoom", hidden: "" }, this.title, this.scroller, this.cellText,
      el("div", {}, close));
    this.cursor = { q: 0, k: 0 };
    this.canvas.addEventListener("keydown", (e) => this.key(e, onClose));
    const point = (event) => {
      if (!this.layout || !this.head) return;
      const at = cellAt(event, this.canvas, this.layout.margin, this.layout.cell, this.tokens.length,
        keysOf(this.head, this.tokens).length);
      const key = at && `${this.head.label} ${at.q} ${at.k} ${this.tokens.length}`;
      if (at && key !== this.pointed) { // a new cell only: a long map is not redrawn at every pointer event
        this.pointed = key;
        this.move(at.q, at.k);
      }
    };
    this.canvas.addEventListener("pointermove", point);
    this.canvas.addEventListener("pointerdown", point);
  }

  /**
   * Enlarge `head` (its cells named by `tokens`), colours 0 .. vmax; `words` say what a cell is (see the top).
   * @param {object} head
   * @param {string[]} tokens
   * @param {number} vmax
   * @param {MapWords} [words]
   */
  open(head, tokens, vmax, words = TOKEN_WORDS) {
    this.head = head;
    this.tokens = tokens;
    this.vmax = vmax;
    this.words = words;
    this.node.hidden = false;
    const m = keysOf(head, tokens).length;
    const size = m === tokens.length ? t("{n} a side", { n: m }) : t("{rows} rows, {columns} columns", { rows: tokens.length, columns: m });
    const title = { label: head.label, axes: words.axes, size };
    setText(this.title, head.off
      ? t("{label} (turned off), enlarged: {axes} ({size}). Arrow keys move through the cells; Escape closes.", title)
      : t("{label}, enlarged: {axes} ({size}). Arrow keys move through the cells; Escape closes.", title));
    this.cursor = { q: Math.min(this.cursor.q, tokens.length - 1), k: Math.min(this.cursor.k, keysOf(head, tokens).length - 1) };
    setText(this.cellText, t("Point at a cell, or use the arrow keys, to read its weight here."));
    this.draw();
  }

  draw() {
    if (this.node.hidden || !this.head) return;
    const n = this.tokens.length;
    const keys = keysOf(this.head, this.tokens);
    const side = Math.max(n, keys.length);
    // the box the map is drawn in (inside the view's padding), else the view's width
    const width = this.scroller.clientWidth || (this.node.parentNode ? this.node.parentNode.clientWidth : 600);
    const probe = this.canvas.getContext("2d");
    probe.font = "12px sans-serif";
    const labels = this.tokens.map((token) => shortLabel(token));
    const keyLabels = keys.map((token) => shortLabel(token));
    const labelWidth = Math.max(...[...labels, ...keyLabels].map((label) => probe.measureText(label).width));
    const layout = zoomLayout(width, side, labelWidth);
    this.layout = layout;
    this.scroller.classList.toggle("mha-live-zoom-long", layout.scrolls);
    const ctx = sizeCanvas(this.canvas, layout.size);
    ctx.clearRect(0, 0, layout.size, layout.size);
    paintMap(ctx, this.head.map, this.vmax, this.head.off, layout.margin, layout.margin, layout.cell * side);
    paintInk(ctx, this.head.ink, layout.margin, layout.margin, layout.cell * n);
    if (layout.labels) {
      ctx.fillStyle = "#222";
      ctx.font = "12px sans-serif";
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      labels.forEach((label, i) => ctx.fillText(label, layout.margin - 4, layout.margin + (i + 0.5) * layout.cell)); // queries
      keyLabels.forEach((label, i) => { // keys, written upwards
        ctx.save();
        ctx.translate(layout.margin + (i + 0.5) * layout.cell, layout.margin - 4);
        ctx.rotate(-Math.PI / 2);
        ctx.textAlign = "left";
        ctx.fillText(label, 0, 0);
        ctx.restore();
      });
    }
    const { q, k } = this.cursor; // the cursor cell: a white-and-black frame, visible on any colour
    ctx.lineWidth = 2;
    ctx.strokeStyle = "#fff";
    ctx.strokeRect(layout.margin + k * layout.cell, layout.margin + q * layout.cell, layout.cell, layout.cell);
    ctx.lineWidth = 1;
    ctx.strokeStyle = "#000";
    ctx.strokeRect(layout.margin + k * layout.cell - 1, layout.margin + q * layout.cell - 1, layout.cell + 2, layout.cell + 2);
    this.canvas.setAttribute("aria-label", this.words.cell(this.head, this.tokens, q, k));
  }

  move(q, k, reveal = false) {
    this.cursor = { q, k };
    const text = this.words.cell(this.head, this.tokens, q, k);
    setText(this.readout, text);
    setText(this.cellText, text);
    this.draw();
    if (reveal) this.reveal(q, k);
  }

  /** Scroll the box of a long map so that cell (q, k) and a cell around it are in sight (the arrow keys). */
  reveal(q, k) {
    const { cell, margin } = this.layout;
    const box = this.scroller;
    const x = margin + k * cell;
    const y = margin + q * cell;
    if (x - cell < box.scrollLeft) box.scrollLeft = Math.max(0, x - cell);
    else if (x + 2 * cell > box.scrollLeft + box.clientWidth) box.scrollLeft = x + 2 * cell - box.clientWidth;
    if (y - cell < box.scrollTop) box.scrollTop = Math.max(0, y - cell);
    else if (y + 2 * cell > box.scrollTop + box.clientHeight) box.scrollTop = y + 2 * cell - box.clientHeight;
  }

  key(event, onClose) {
    const n = this.tokens.length;
    const m = keysOf(this.head, this.tokens).length;
    const { q, k } = this.cursor;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (event.key in moves) {
      event.preventDefault();
      const [dq, dk] = moves[event.key];
      this.move(Math.min(n - 1, Math.max(0, q + dq)), Math.min(m - 1, Math.max(0, k + dk)), true);
    } else if (event.key === "Escape") {
      event.preventDefault();
      onClose();
    }
  }
}

/** The colour scale: a gradient from 0 to vmax. */
export class Legend {
  constructor() {
    this.canvas = el("canvas", { "aria-hidden": "true" });
    this.low = el("span", {}, "0");
    this.high = el("span");
    this.node = el("div", { class: "mha-live-legend" }, el("span", {}, t("weight ")), this.low, this.canvas, this.high);
  }

  show(vmax) {
    const ctx = sizeCanvas(this.canvas, 120, 10);
    for (let x = 0; x < 120; x++) {
      const [r, g, b] = colourOf((x / 119) * vmax, vmax);
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      ctx.fillRect(x, 0, 1, 10);
    }
    setText(this.high, vmax.toFixed(2));
    this.node.setAttribute("aria-label", t("colour scale: dark purple 0 to yellow {vmax}", { vmax: vmax.toFixed(2) }));
  }
}

// =============================================================================================
// 4. The views
