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
