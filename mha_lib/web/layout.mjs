// layout.mjs -- the pure maths of drawing (no DOM): the colour scale and the layouts of the maps.

/** matplotlib's viridis at 17 evenly spaced points (the book's static figures use viridis). */
export const VIRIDIS = [
  [68, 1, 84], [72, 24, 106], [71, 45, 123], [66, 64, 134], [59, 82, 139], [51, 99, 141],
  [44, 114, 142], [38, 130, 142], [33, 145, 140], [31, 160, 136], [40, 174, 128], [63, 188, 115],
  [94, 201, 98], [132, 212, 75], [173, 220, 48], [216, 226, 25], [253, 231, 37],
];

/**
 * Colour of a weight on the scale 0 .. vmax (viridis, linearly interpolated).
 * @param {number} value  the weight; clipped into [0, vmax]
 * @param {number} vmax   top of the scale (> 0)
 * @returns {number[]} [r, g, b], integers in 0..255
 */
export function colourOf(value, vmax) {
  const top = vmax > 0 ? vmax : 1;
  const t = Math.min(1, Math.max(0, (Number.isFinite(value) ? value : 0) / top)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(t));
  const f = t - i;
  return VIRIDIS[i].map((c, j) => Math.round(c + f * (VIRIDIS[i + 1][j] - c)));
}

/** The grey of a weight, for a head that is turned off (same lightness order as viridis). */
export function greyOf(value, vmax) {
  const [r, g, b] = colourOf(value, vmax);
  const y = Math.round(0.3 * r + 0.59 * g + 0.11 * b);
  return [y, y, y];
}

/** Largest weight over a list of maps ([query][key] arrays); 1 when there is none. */
export function largestWeight(maps) {
  let top = 0;
  for (const map of maps) for (const row of map) for (const w of row) if (w > top) top = w;
  return top > 0 ? top : 1;
}

/**
 * Grid layout of `count` square maps of L x L cells in a column `width` px wide.
 * Columns: as many as fit with maps of at least `minMap` px, then balanced so that rows are
 * full (12 heads in 5 possible columns -> 3 rows of 4). Cells are whole pixels when a cell is
 * 4 px or more (even cells); smaller cells are fractional (the map is scaled).
 * @returns {{columns:number, rows:number, map:number, cell:number}} map: side in CSS px
 */
export function gridLayout({ width, count, length, minMap = 110, maxMap = 220, gap = 8 }) {
  if (!(count >= 1) || !(length >= 1)) throw new Error(`gridLayout needs count >= 1 and length >= 1, got ${count}, ${length}`);
  const usable = Math.max(40, Math.floor(width));
  const fit = Math.max(1, Math.floor((usable + gap) / (minMap + gap)));
  const rows = Math.ceil(count / Math.min(count, fit));
  const columns = Math.ceil(count / rows);
  let map = Math.min(maxMap, Math.floor((usable - gap * (columns - 1)) / columns));
  let cell = map / length;
  if (cell >= 4) {
    cell = Math.floor(cell);
    map = cell * length;
  }
  return { columns, rows, map, cell };
}

/**
 * The last item of the grid row that holds item `index` (the enlarged map opens after it, under the clicked map).
 * @param {number} index   0-based item
 * @param {number} columns items per row (>= 1)
 * @param {number} count   items in the grid
 * @returns {number} index of the row's last item (the grid's last item for a short last row)
 */
export function rowEnd(index, columns, count) {
  if (!(columns >= 1) || !(index >= 0) || index >= count) {
    throw new Error(`rowEnd: item ${index} of ${count} in ${columns} columns`);
  }
  return Math.min(count - 1, (Math.floor(index / columns) + 1) * columns - 1);
}

/**
 * Layout of one enlarged map with token labels: label margins, cell size. A map that fits the width has
 * cells of 9-32 px; a longer input keeps cells of `minCell` px, every token labelled, and the map scrolls
 * in its box (`scrolls`): 256 tokens stay readable instead of shrinking to 2 px a cell.
 * @param {number} width      available width (px)
 * @param {number} length     L
 * @param {number} labelWidth width of the longest label (px), measured by the caller
 * @param {number} minCell    cell side (px) of a map too long for the width (12 px: one line of 12 px labels)
 * @returns {{cell:number, margin:number, size:number, labels:boolean, scrolls:boolean}} size: full canvas side
 */
export function zoomLayout(width, length, labelWidth, minCell = 12) {
  const side = Math.max(120, Math.min(Math.floor(width), 640));
  const margin = Math.min(Math.ceil(labelWidth) + 8, Math.floor(side * 0.3));
  const fits = (side - margin) / length;
  const cell = fits >= 9 ? Math.min(32, Math.floor(fits)) : minCell;
  const size = margin + cell * length;
  return { cell, margin, size, labels: true, scrolls: size > side };
}

/** matplotlib's RdBu_r at 11 evenly spaced points: blue for negative values, near-white at 0, red for positive. */
export const RDBU = [
  [5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
  [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31],
];

/**
 * Colour of a signed value on the scale -vmax .. vmax (RdBu_r, linearly interpolated): the steps view's
 * activations, projections and scores.
 * @param {number} value  clipped into [-vmax, vmax]; not finite: the colour of 0
 * @param {number} vmax   half the scale's range (> 0)
 * @returns {number[]} [r, g, b], integers in 0..255
 */
export function divergingOf(value, vmax) {
  const top = vmax > 0 ? vmax : 1;
  const v = Number.isFinite(value) ? value : 0;
  const t = (Math.min(1, Math.max(-1, v / top)) + 1) / 2 * (RDBU.length - 1);
  const i = Math.min(RDBU.length - 2, Math.floor(t));
  const f = t - i;
  return RDBU[i].map((c, j) => Math.round(c + f * (RDBU[i + 1][j] - c)));
}

/** Largest absolute finite value of a [row][column] matrix; 1 when there is none (or all are 0). */
export function largestAbs(matrix) {
  let top = 0;
  for (const row of matrix) for (const v of row) if (Number.isFinite(v) && Math.abs(v) > top) top = Math.abs(v);
  return top > 0 ? top : 1;
}

/**
 * Whether a thumbnail `size` px a side, of `length` cells along its longer side, has room for its token labels
 * (rows on the left, columns on top) of `labelWidth` px: the map then shrinks by the label margin, and its cells
 * stay at least `minCell` px (one line of labels each).
 * @returns {{labels: boolean, margin: number, cell: number}}  margin 0 and the whole size when there is no room
 */
export function labelledMap(size, length, labelWidth, minCell = 10) {
  if (!(size > 0) || !(length >= 1)) throw new Error(`labelledMap needs a size and a length, got ${size}, ${length}`);
  const margin = Math.ceil(labelWidth) + 6;
  const cell = (size - margin) / length;
  if (margin < size * 0.45 && cell >= minCell) return { labels: true, margin, cell };
  return { labels: false, margin: 0, cell: size / length };
}

/** A qualitative colour per head (d3's category10, then two more), cycling past 12 heads. */
export const HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a"];

/** The colour of head `h`. */
export function headColour(h) {
  return HEAD_COLOURS[((h % HEAD_COLOURS.length) + HEAD_COLOURS.length) % HEAD_COLOURS.length];
}

/**
 * Where a head view (BertViz's: queries on the left, keys on the right, a line per pair) puts things, for `n`
 * tokens in a box `width` px wide with labels of at most `labelWidth` px: the two label columns, the line ends and
 * the row height. The same layout draws the page's canvas and the exported SVG.
 * @returns {{width, height, row, top, left, right, labelWidth, y: (i) => number}}  left/right: x of the line ends
 */
export function headViewLayout(n, width, labelWidth, row = 22) {
  if (!(n >= 1)) throw new Error(`headViewLayout needs tokens, got ${n}`);
  const w = Math.max(200, Math.min(Math.floor(width), 560));
  const label = Math.min(Math.ceil(labelWidth), Math.floor(w * 0.3));
  const top = 8;
  const left = label + 10;
  const right = w - label - 10;
  return { width: w, height: top * 2 + n * row, row, top, left, right, labelWidth: label,
    y: (i) => top + (i + 0.5) * row };
}
